//! On-demand benchmark: `cargo bench` (or `cargo bench -- quick` for fewer samples).
//! Wall-clock figures belong here, never in tests: CI machines are noisy, and so is the
//! machine this runs on. Every speed figure is therefore printed as a **ratio to a bare-tokio
//! floor measured in the same process, in the same run**, next to the absolute time.
//!
//! The floor does the same work with nothing of rehearsal: a fresh current-thread paused
//! runtime per run; a parent spawns N tasks under a semaphore of C permits; each task runs M
//! steps of `sleep(model latency 200–4000 ms)`, `yield_now`, `sleep(tool latency 5–500 ms)`,
//! then one last model sleep, all under a 60 s timeout. The rehearsal side is the equivalent
//! scenario (bub preset, cap C): the root spawns N `subagent` children in one reply; each child
//! makes M tool-calling replies with the same latencies and a final answer; the root either
//! waits with one `subagent.wait` ("wait") or answers every notification ("notify").
//!
//! Sections: the three shapes (verify = two runs and every oracle, as `rehearsal run` does;
//! one run + judge); µs, allocations and bytes per trace event; scaling (log-log slopes of
//! time and peak memory when N or M doubles); the two memory cases of issue 11; the fuzzer's
//! rate on one core. Allocations and peak bytes come from a counting global allocator.

use std::alloc::{GlobalAlloc, Layout};

use mimalloc::MiMalloc;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use rehearsal::internals::fuzz;
use rehearsal::internals::generate::Family;
use rehearsal::internals::harness::schedule::Schedule;
use rehearsal::internals::seed::splitmix64;
use rehearsal::runner;
use rehearsal::scenario::{self, Scenario};

// ---------------------------------------------------------------------------------------------
// A counting allocator: allocations, live bytes, peak live bytes; over the allocator the
// `rehearsal` binary uses (mimalloc), so the figures are the command's. It counts only inside
// `measure_memory`: elsewhere an allocation costs one relaxed load more than the command's, not
// four atomic read-modify-writes, which would tax the timed code (it allocates more than the
// floor does) with the benchmark's own bookkeeping.
// ---------------------------------------------------------------------------------------------

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicUsize = AtomicUsize::new(0);
// Signed: a block allocated before counting began and freed during it takes LIVE below
// where it started.
static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);
static TOTAL_BYTES: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
            TOTAL_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
            grow(layout.size() as isize);
        }
        unsafe { MiMalloc.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        }
        unsafe { MiMalloc.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
            grow(new_size as isize - layout.size() as isize);
        }
        unsafe { MiMalloc.realloc(ptr, layout, new_size) }
    }
}

/// Live bytes change by `delta`; the peak follows.
fn grow(delta: isize) {
    let live = LIVE.fetch_add(delta, Ordering::Relaxed) + delta;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// What `f` allocated: the number of allocations, the bytes allocated in all, and the peak of
/// live bytes above the starting level.
struct Memory {
    allocs: usize,
    bytes: usize,
    peak: usize,
}

fn measure_memory<T>(f: impl FnOnce() -> T) -> (T, Memory) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let (allocs, bytes) = (ALLOCS.load(Ordering::Relaxed), TOTAL_BYTES.load(Ordering::Relaxed));
    COUNTING.store(true, Ordering::SeqCst);
    let out = f();
    COUNTING.store(false, Ordering::SeqCst);
    let memory = Memory {
        allocs: ALLOCS.load(Ordering::Relaxed) - allocs,
        bytes: TOTAL_BYTES.load(Ordering::Relaxed) - bytes,
        peak: (PEAK.load(Ordering::Relaxed) - base).max(0) as usize,
    };
    (out, memory)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// The median wall time of `f` over `n` calls.
fn time_median(n: usize, mut f: impl FnMut()) -> Duration {
    median(
        (0..n)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed()
            })
            .collect(),
    )
}

// ---------------------------------------------------------------------------------------------
// The shapes: latencies drawn from one seed, shared by the floor and the scenario.
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
struct Shape {
    n: usize,
    m: usize,
    cap: usize,
}

fn model_ms(i: usize, j: usize) -> u64 {
    200 + splitmix64((i * 10_007 + j) as u64) % 3801
}

fn tool_ms(i: usize, j: usize) -> u64 {
    5 + splitmix64(((i * 10_007 + j) as u64) ^ 0xABCD) % 496
}

/// The bare-tokio floor for a shape: one run.
fn floor(shape: Shape) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
    runtime.block_on(async {
        let permits = Arc::new(tokio::sync::Semaphore::new(shape.cap));
        let mut tasks = Vec::with_capacity(shape.n);
        for i in 0..shape.n {
            let permits = permits.clone();
            let m = shape.m;
            tasks.push(tokio::spawn(async move {
                let _permit = permits.acquire_owned().await.unwrap();
                let work = async {
                    for j in 0..m {
                        tokio::time::sleep(Duration::from_millis(model_ms(i, j))).await;
                        tokio::task::yield_now().await;
                        tokio::time::sleep(Duration::from_millis(tool_ms(i, j))).await;
                    }
                    tokio::time::sleep(Duration::from_millis(model_ms(i, m))).await;
                };
                let _ = tokio::time::timeout(Duration::from_secs(60), work).await;
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
}

#[derive(Clone, Copy, PartialEq)]
enum RootStyle {
    /// One `subagent.wait` for everything.
    Wait,
    /// A reply to every notification (the held turn).
    Notify,
}

fn shape_scenario(shape: Shape, style: RootStyle, root_replies: usize) -> Scenario {
    shape_scenario_limited(shape, style, root_replies, Some(60_000))
}

/// The scenario of a shape with a given time limit per child (`None`: no limit).
fn shape_scenario_limited(shape: Shape, style: RootStyle, root_replies: usize, limit_ms: Option<u64>) -> Scenario {
    let Shape { n, m, cap } = shape;
    let spawns: Vec<Value> =
        (0..n).map(|i| json!({"tool": "subagent", "args": {"prompt": format!("[c{i}] do part {i}")}})).collect();
    let mut root = vec![json!({"calls": spawns, "latency_ms": 100})];
    match style {
        RootStyle::Wait => {
            root.push(
                json!({"calls": [{"tool": "subagent.wait", "args": {"timeout_seconds": 86_400}}], "latency_ms": 100}),
            );
            root.push(json!({"text": "all done", "latency_ms": 100}));
        }
        RootStyle::Notify => root.extend((0..root_replies).map(|_| json!({"text": "noted", "latency_ms": 100}))),
    }
    let mut lanes = vec![json!({"agent": "main", "replies": root})];
    let mut tools = Vec::new();
    for i in 0..n {
        let mut replies: Vec<Value> = (0..m)
            .map(|j| json!({"calls": [{"tool": format!("T{i}"), "args": {"step": j}}], "latency_ms": model_ms(i, j)}))
            .collect();
        replies.push(json!({"text": format!("part {i} done"), "latency_ms": model_ms(i, m)}));
        lanes.push(json!({"task_contains": format!("[c{i}]"), "replies": replies}));
        let results: Vec<Value> = (0..m).map(|j| json!({"text": "ok", "latency_ms": tool_ms(i, j)})).collect();
        tools.push(json!({"name": format!("T{i}"), "results": results}));
    }
    let file = json!({
        "name": format!("bench-{n}x{m}-cap{cap}"),
        "rules": {
            "preset": "bub", "max_concurrency": cap, "child_step_cap": m + 1,
            "root_step_budget": n * (m + 3) + 50, "subagent_default_timeout_ms": limit_ms
        },
        "tools": tools,
        "lanes": lanes,
        "turns": [{"user": "Do all the parts."}],
        "limits": {"max_events": 1_000_000, "horizon_ms": 86_400_000}
    });
    scenario::parse(Path::new("bench.json"), &file.to_string()).unwrap_or_else(|e| panic!("{e}"))
}

/// The equivalent scenario of a shape; for the notify style, with exactly as many root
/// replies as its wake-ups need (found by a first run).
fn equivalent(shape: Shape, style: RootStyle) -> Scenario {
    if style == RootStyle::Wait {
        return shape_scenario(shape, style, 0);
    }
    let probe = shape_scenario(shape, style, shape.n + 2);
    let used = runner::Runner::new().run(&probe, &[], Schedule::default_order()).lane_use[0];
    let scenario = shape_scenario(shape, style, used - 1);
    let verdict = runner::Runner::new().verify(&scenario, &[]);
    assert!(verdict.passed(), "{}", verdict.failures().iter().map(|f| f.what.clone()).collect::<Vec<_>>().join("\n"));
    scenario
}

// ---------------------------------------------------------------------------------------------
// Sections
// ---------------------------------------------------------------------------------------------

/// Times each of `subjects` against the floor, interleaved: every sample runs the floor and
/// then each subject back to back, so a noisy neighbour slows both sides of a ratio alike.
/// Returns the floor's median and, per subject, its median and the median of its per-sample
/// ratios to the floor.
fn interleaved(samples: usize, floor: impl Fn(), subjects: &[&dyn Fn()]) -> (Duration, Vec<(Duration, f64)>) {
    let time = |f: &dyn Fn()| {
        let start = Instant::now();
        f();
        start.elapsed()
    };
    let mut floors = Vec::new();
    let mut times = vec![Vec::new(); subjects.len()];
    let mut ratios = vec![Vec::new(); subjects.len()];
    for _ in 0..samples {
        let base = time(&floor);
        floors.push(base);
        for (k, subject) in subjects.iter().enumerate() {
            let t = time(*subject);
            times[k].push(t);
            ratios[k].push(t.as_secs_f64() / base.as_secs_f64());
        }
    }
    let median_f = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let out = times.into_iter().zip(ratios).map(|(t, r)| (median(t), median_f(r))).collect();
    (median(floors), out)
}

fn shapes(samples: usize) {
    println!("## Shapes: ratio to the bare-tokio floor (median of {samples} interleaved samples, same process)");
    println!(
        "| shape | root | floor µs/run | verify µs (1 thread) | × floor | verify µs (2 threads) | × floor | run+judge µs | × floor | events | µs/event | allocs/event | bytes/event |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let parallel = runner::Runner::new().parallel(true);
    for shape in [Shape { n: 4, m: 5, cap: 2 }, Shape { n: 16, m: 10, cap: 4 }, Shape { n: 64, m: 20, cap: 8 }] {
        for style in [RootStyle::Wait, RootStyle::Notify] {
            let scenario = equivalent(shape, style);
            // Prepared once, as `rehearsal run` prepares a file once for all its runs.
            let prepared = runner::Runner::new().prepare(&scenario, &[]);
            let verify = || {
                runner::Runner::new().verify(&scenario, &[]);
            };
            let verify_parallel = || {
                parallel.verify(&scenario, &[]);
            };
            let run_judge = || {
                runner::judge(&scenario, prepared.run(Schedule::default_order()));
            };
            let (floor_t, timed) = interleaved(samples, || floor(shape), &[&verify, &verify_parallel, &run_judge]);
            let [(verify_t, verify_x), (parallel_t, parallel_x), (judge_t, judge_x)] = timed[..] else {
                unreachable!()
            };
            let (run, memory) = measure_memory(|| {
                runner::judge(&scenario, prepared.run(Schedule::default_order())).into_run().expect("an in-process run")
            });
            let events = run.trace.entries.len();
            println!(
                "| {}×{}, cap {} | {} | {:.0} | {:.0} | {:.1} | {:.0} | {:.1} | {:.0} | {:.1} | {events} | {:.2} | {:.1} | {:.0} |",
                shape.n,
                shape.m,
                shape.cap,
                if style == RootStyle::Wait { "wait" } else { "notify" },
                us(floor_t),
                us(verify_t),
                verify_x,
                us(parallel_t),
                parallel_x,
                us(judge_t),
                judge_x,
                us(judge_t) / events as f64,
                memory.allocs as f64 / events as f64,
                memory.bytes as f64 / events as f64,
            );
        }
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn slope(points: &[(f64, f64)]) -> f64 {
    let (x0, y0) = points[0];
    let (x1, y1) = points[points.len() - 1];
    (y1 / y0).ln() / (x1 / x0).ln()
}

fn scaling(samples: usize) {
    println!();
    println!("## Scaling: one run + judge as N (children) or M (steps) doubles; log-log slopes");
    for (label, shapes) in [
        ("N doubles (M 10, cap 4)", (0..4).map(|k| Shape { n: 16 << k, m: 10, cap: 4 }).collect::<Vec<_>>()),
        ("M doubles (N 16, cap 4)", (0..4).map(|k| Shape { n: 16, m: 10 << k, cap: 4 }).collect::<Vec<_>>()),
    ] {
        let mut time_points = Vec::new();
        let mut memory_points = Vec::new();
        let mut cells = Vec::new();
        for shape in shapes {
            // No time limit, so every child runs all its steps and the work really doubles.
            let scenario = shape_scenario_limited(shape, RootStyle::Wait, 0, None);
            let prepared = runner::Runner::new().prepare(&scenario, &[]);
            let t = time_median(samples.div_ceil(2), || {
                runner::judge(&scenario, prepared.run(Schedule::default_order()));
            });
            let (_, memory) = measure_memory(|| runner::judge(&scenario, prepared.run(Schedule::default_order())));
            let peak = memory.peak;
            let x = (shape.n * shape.m) as f64;
            time_points.push((x, us(t)));
            memory_points.push((x, peak as f64));
            cells.push(format!("{}×{}: {:.0} µs, {:.1} MB", shape.n, shape.m, us(t), peak as f64 / 1e6));
        }
        println!(
            "- {label}: {}; time slope {:.2}, memory slope {:.2}",
            cells.join("; "),
            slope(&time_points),
            slope(&memory_points)
        );
    }
}

fn memory_cases() {
    println!();
    println!("## Memory cases (one verify each: two runs and every oracle)");
    // Without a time limit, so every child runs its 50 steps (with the 60 s limit of the
    // shapes, most would be stopped halfway).
    let big = shape_scenario_limited(Shape { n: 256, m: 50, cap: 8 }, RootStyle::Wait, 0, None);
    let start = Instant::now();
    let (verdict, Memory { peak, .. }) = measure_memory(|| runner::Runner::new().verify(&big, &[]));
    println!(
        "- 256 children × 50 steps: {:.2} s, peak {:.1} MB, {} events, passed: {}",
        start.elapsed().as_secs_f64(),
        peak as f64 / 1e6,
        verdict.run().unwrap().trace.entries.len(),
        verdict.passed()
    );
    drop(verdict);

    let turns = 200;
    let mut replies = Vec::new();
    for _ in 0..turns {
        replies.push(json!({"calls": [{"tool": "Read", "args": {"path": "big.log"}}], "latency_ms": 10}));
        replies.push(json!({"text": "read it", "latency_ms": 10}));
    }
    let file = json!({
        "name": "200-turns-100kb",
        "tools": [{"name": "Read", "latency_ms": 5, "results": [{"text": {"repeat": "0123456789", "count": 10_000}}]}],
        "lanes": [{"agent": "main", "replies": replies}],
        "turns": (0..turns).map(|t| json!({"user": format!("turn {t}")})).collect::<Vec<_>>(),
        "limits": {"max_events": 1_000_000}
    });
    let scenario = scenario::parse(Path::new("bench.json"), &file.to_string()).unwrap();
    let start = Instant::now();
    let (verdict, Memory { peak, .. }) = measure_memory(|| runner::Runner::new().verify(&scenario, &[]));
    println!(
        "- 200 turns each reading a 100 KB result: {:.2} s, peak {:.1} MB, passed: {}",
        start.elapsed().as_secs_f64(),
        peak as f64 / 1e6,
        verdict.passed()
    );
    drop(verdict);

    let steps = 2000;
    let replies: Vec<Value> = (0..steps)
        .map(|_| json!({"calls": [{"tool": "Frobnicate", "undeclared": true}], "latency_ms": 1}))
        .chain([json!({"text": "gave up"})])
        .collect();
    let file = json!({
        "name": "2000-unknown-tool-steps",
        "rules": {"root_step_budget": steps + 5},
        "lanes": [{"agent": "main", "replies": replies}],
        "turns": [{"user": "try"}],
        "limits": {"max_events": 1_000_000}
    });
    let scenario = scenario::parse(Path::new("bench.json"), &file.to_string()).unwrap();
    let start = Instant::now();
    let (verdict, Memory { peak, .. }) = measure_memory(|| runner::Runner::new().verify(&scenario, &[]));
    println!(
        "- 2,000 unknown-tool steps: {:.2} s, peak {:.1} MB, passed: {}",
        start.elapsed().as_secs_f64(),
        peak as f64 / 1e6,
        verdict.passed()
    );
}

fn fuzz_rate(cases: u64) {
    println!();
    println!("## Fuzzer rate on one core");
    for explore in [0, 2] {
        let options = fuzz::Options {
            cases,
            seed: 1,
            explore,
            family: Family::Any,
            shrink_steps: 4096,
            jobs: 1,
            judge: Default::default(),
        };
        let start = Instant::now();
        let report = fuzz::run(&options, |_| {});
        let elapsed = start.elapsed();
        assert!(report.finding.is_none(), "the correct core has a finding: {:?}", report.finding);
        println!(
            "- `fuzz --cases {cases} --seed 1 --explore {explore}`: {:.2} s, {:.0} cases/s, {} invalid",
            elapsed.as_secs_f64(),
            report.cases as f64 / elapsed.as_secs_f64(),
            report.invalid
        );
    }
}

/// `cargo bench -- profile`: one run + judge of the 64×20 notify shape, over and over, and
/// nothing else; for `perf record` on the bench binary. `profile 4x5` and `profile 16x10`
/// loop a smaller shape instead (with as many more loops as it is smaller), where the fixed
/// costs of a run and a judgement weigh more.
fn profile(args: &[String]) {
    let shape = if args.iter().any(|a| a == "4x5") {
        Shape { n: 4, m: 5, cap: 2 }
    } else if args.iter().any(|a| a == "16x10") {
        Shape { n: 16, m: 10, cap: 4 }
    } else {
        Shape { n: 64, m: 20, cap: 8 }
    };
    let loops = 300 * (64 * 20) / (shape.n * shape.m);
    let scenario = equivalent(shape, RootStyle::Notify);
    let prepared = runner::Runner::new().prepare(&scenario, &[]);
    let start = Instant::now();
    let (mut running, mut judging) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..loops {
        let run_start = Instant::now();
        let run = prepared.run(Schedule::default_order());
        let judge_start = Instant::now();
        runner::judge(&scenario, run);
        running += judge_start - run_start;
        judging += judge_start.elapsed();
    }
    let floor_start = Instant::now();
    for _ in 0..loops {
        floor(shape);
    }
    let floor_time = floor_start.elapsed().as_secs_f64();
    println!(
        "profile {}×{}: {loops} runs + judge in {:.2} s (runs {:.2} s = {:.2}× floor, judging {:.2} s = {:.2}× floor); {loops} floor runs in {floor_time:.2} s",
        shape.n,
        shape.m,
        (floor_start - start).as_secs_f64(),
        running.as_secs_f64(),
        running.as_secs_f64() / floor_time,
        judging.as_secs_f64(),
        judging.as_secs_f64() / floor_time,
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "profile") {
        return profile(&args);
    }
    let quick = args.iter().any(|a| a == "quick");
    let samples = if quick { 5 } else { 21 };
    // Sections named on the command line (`cargo bench -- quick shapes`), or all of them.
    let sections = ["shapes", "scaling", "memory", "fuzz"];
    let named: Vec<&str> = sections.iter().copied().filter(|s| args.iter().any(|a| a == s)).collect();
    let run = |section: &str| named.is_empty() || named.contains(&section);
    if run("shapes") {
        shapes(samples);
    }
    if run("scaling") {
        scaling(samples);
    }
    if run("memory") {
        memory_cases();
    }
    if run("fuzz") {
        fuzz_rate(if quick { 2_000 } else { 10_000 });
    }
}

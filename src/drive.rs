//! `rehearsal drive`: one scenario played against a runtime in another process. The server of
//! [`crate::wire`] plays the model; the runtime's command runs once per user turn, in its own
//! process group, in a fresh temp home and working directory kept across the scenario's turns,
//! with the environment of its [`RuntimeDescription`]; its exit code, stdout and stderr are
//! recorded; then the run is judged by the model-side oracles against the runtime's own limits,
//! and each turn's `expect.message` / `message_contains` against its stdout and `expect.status`
//! against its exit code.
//!
//! Placeholders in the command's arguments: `{message}` (the turn's user message), `{turn}`
//! (its number, from 1), `{session}` (the scenario's `session.id`), `{home}` and `{workdir}`.
//!
//! Processes: on Unix each turn's command leads a new process group (`process_group(0)`) and
//! carries a tag of its own in its environment (`REHEARSAL_RUN_TAG_<pid>_<n>=1`, inherited by
//! every descendant). When the command exits, passes the wall-clock limit or the caller is
//! interrupted, the whole group is killed (SIGKILL), and then, on Linux, every process still
//! carrying the turn's tag, which finds a descendant that left the group (`setsid`, a
//! daemon's double fork) too. The `rehearsal` binary ([`crate::cli::main_with`]) also makes
//! itself a child subreaper (`PR_SET_CHILD_SUBREAPER`), so such orphans are re-parented to it
//! rather than to init, and reaps those it kills. A library user's test binary is not made a
//! subreaper (that is a process-wide setting its owner decides): the tag still finds and
//! kills the leftovers, and init reaps them. A descendant that both leaves the group and
//! clears its environment is beyond both. Other Unix systems get the group kill only;
//! platforms without process groups kill only the command itself. What a turn printed is kept
//! up to the moment of the kill, even when a leftover held the pipe.
//!
//! On virtual time ([`DriveOptions::clock`], `--clock`; docs/clock-protocol.md): one clock
//! endpoint per scenario, bound before its first turn, so time continues across turns; each
//! turn's runtime gets `REHEARSAL_CLOCK` (the endpoint), `PYTHONPATH` led by the clock shim's
//! folder and `PYTHONHASHSEED=0`; the server serves on that clock. A clock that ends by itself
//! (stuck, stalled, a limit, a protocol error) stops waiting for the runtime after
//! [`ClockDrive::end_grace`] and becomes a finding that quotes the end: the harness stopped
//! following the runtime, which is not a rule the runtime broke.
//!
//! What this module deliberately does not do: serve requests (the wire does), judge a rule
//! (the oracles do), or parse the command line (the CLI does).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::AsyncReadExt;

use crate::runner::{Failure, FailureKind, Verdict};
use crate::runtime::RuntimeDescription;
use crate::scenario::Scenario;
use crate::sut::event::Status;
use crate::wire::clock::{ClockEnd, ClockEndpoint, ClockLimits, ClockOptions, ClockReport};
use crate::wire::{self, End, ServeOptions, Server, WireRun};

/// How a scenario is driven on virtual time. Every limit is named here with its default.
#[derive(Clone, Debug)]
pub struct ClockDrive {
    /// The folder holding the clock shim's `sitecustomize.py` (put first on `PYTHONPATH`).
    pub shim: PathBuf,
    /// Seeds the runtime's randomness (`welcome.seed`). Default 0.
    pub seed: u64,
    /// Permutes replies (and requests) of one instant (`--explore`); `None`: the clock's order.
    pub tie_seed: Option<u64>,
    /// The clock's limits.
    pub limits: ClockLimits,
    /// After the clock ended by itself, how long (wall time) the runtime is given to exit
    /// before its group is killed. Default 5 s.
    pub end_grace: Duration,
}

impl ClockDrive {
    /// On the shim in `shim`, with the defaults.
    pub fn new(shim: PathBuf) -> ClockDrive {
        ClockDrive { shim, seed: 0, tie_seed: None, limits: ClockLimits::default(), end_grace: Duration::from_secs(5) }
    }
}

/// How a scenario is driven. Every limit is named here with its default.
#[derive(Clone, Debug)]
pub struct DriveOptions {
    /// The command and its arguments (with placeholders).
    pub command: Vec<String>,
    /// Real seconds per scripted second of latency. Default 1.
    pub time_scale: f64,
    /// The wall-clock limit of one turn's command; past it the group is killed. Default 60 s.
    pub turn_limit: Duration,
    /// The most bytes kept of a turn's stdout and of its stderr. Default 1 MiB.
    pub output_max_bytes: usize,
    /// Set from outside (Ctrl-C): the running command's group is killed and no turn starts.
    pub interrupt: Option<Arc<AtomicBool>>,
    /// Where the temp folders are made. Default: the system's temp folder.
    pub temp_root: Option<PathBuf>,
    /// Drive on virtual time (`--clock`); `time_scale` is then unused. Default `None`.
    pub clock: Option<ClockDrive>,
    /// Hold replies at a barrier until the runtime is quiet for this long (`--barrier`,
    /// [`crate::wire::ServeOptions::barrier`]). Not with `clock`. Default `None`.
    pub barrier: Option<Duration>,
}

impl Default for DriveOptions {
    fn default() -> DriveOptions {
        DriveOptions {
            command: Vec::new(),
            time_scale: 1.0,
            turn_limit: Duration::from_secs(60),
            output_max_bytes: 1 << 20,
            interrupt: None,
            temp_root: None,
            clock: None,
            barrier: None,
        }
    }
}

/// Why a scenario could not be driven at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriveError {
    /// The command was not found, or failed to start: the system under test could not be run.
    NotRun(String),
    /// The server could not start, or the temp folders could not be made.
    Setup(String),
}

impl std::fmt::Display for DriveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DriveError::NotRun(why) | DriveError::Setup(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for DriveError {}

/// How one turn's command ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exited {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it (Unix), not sent by drive.
    Signal(i32),
    /// Drive killed it at the wall-clock limit.
    TimedOut,
    /// Drive killed it because the caller was interrupted.
    Interrupted,
    /// Drive killed it: the clock had ended by itself and it did not exit within
    /// [`ClockDrive::end_grace`].
    ClockEnded,
}

/// One turn's run of the command.
#[derive(Clone, Debug)]
pub struct TurnRun {
    /// The arguments as run, placeholders filled.
    pub args: Vec<String>,
    /// How it ended.
    pub exited: Exited,
    /// Its stdout (lossy UTF-8, at most [`DriveOptions::output_max_bytes`]).
    pub stdout: String,
    /// Its stderr, likewise.
    pub stderr: String,
    /// Wall time it ran.
    pub elapsed: Duration,
}

/// A driven scenario: the verdict and what it was made of.
#[derive(Debug)]
pub struct Driven {
    /// The verdict (its run's `elapsed` is zero: wall times vary, and a report must not).
    pub verdict: Verdict,
    /// Each turn's run.
    pub turns: Vec<TurnRun>,
    /// The served run.
    pub wire: WireRun,
    /// What was not judged, and why (expectations on core events, rules knobs replaced).
    pub notes: Vec<String>,
    /// Under the clock: how it ended, its virtual end, its transcript.
    pub clock: Option<ClockReport>,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A temp folder removed on drop.
pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    pub(crate) fn new(root: Option<&Path>) -> std::io::Result<TempDir> {
        let root = root.map_or_else(std::env::temp_dir, Path::to_path_buf);
        loop {
            let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = root.join(format!("rehearsal-drive-{}-{n}", std::process::id()));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(TempDir(path)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Fills the placeholders of one argument.
pub fn substitute(arg: &str, message: &str, turn: usize, session: &str, home: &Path, workdir: &Path) -> String {
    // One pass, so a message holding `{turn}` is not substituted again.
    let mut out = String::with_capacity(arg.len());
    let mut rest = arg;
    let keys: [(&str, String); 5] = [
        ("{message}", message.to_string()),
        ("{turn}", turn.to_string()),
        ("{session}", session.to_string()),
        ("{home}", home.to_string_lossy().into_owned()),
        ("{workdir}", workdir.to_string_lossy().into_owned()),
    ];
    'outer: while !rest.is_empty() {
        for (key, value) in &keys {
            if let Some(after) = rest.strip_prefix(key) {
                out.push_str(value);
                rest = after;
                continue 'outer;
            }
        }
        let c = rest.chars().next().expect("not empty");
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Drives `scenario` on the runtime `description` with `options`. Must be called inside a
/// tokio runtime with I/O and time enabled.
pub async fn drive(
    scenario: &Scenario,
    description: &RuntimeDescription,
    options: &DriveOptions,
) -> Result<Driven, DriveError> {
    let Some(program) = options.command.first() else {
        return Err(DriveError::NotRun("no command given after `--`".into()));
    };
    let temp = TempDir::new(options.temp_root.as_deref())
        .map_err(|e| DriveError::Setup(format!("cannot make a temp folder: {e}")))?;
    let home = temp.0.join("home");
    let workdir = temp.0.join("work");
    for dir in [&home, &workdir] {
        std::fs::create_dir_all(dir).map_err(|e| DriveError::Setup(format!("cannot make {}: {e}", dir.display())))?;
    }
    seed_files(scenario, &workdir).map_err(DriveError::Setup)?;
    let endpoint = match &options.clock {
        Some(setup) => {
            let clock = ClockOptions {
                seed: setup.seed,
                tie_seed: setup.tie_seed,
                limits: setup.limits.clone(),
                ..ClockOptions::default()
            };
            Some(
                ClockEndpoint::bind(clock)
                    .await
                    .map_err(|e| DriveError::Setup(format!("cannot bind the clock endpoint: {e}")))?,
            )
        }
        None => None,
    };
    let serve = ServeOptions {
        time_scale: options.time_scale,
        // The commands' own ends, not an idle guess, end a driven run; the idle limit only
        // bounds `done`, which drive does not wait on.
        idle_limit: options.turn_limit.saturating_mul(scenario.turns.len().max(1) as u32),
        clock: endpoint.as_ref().map(ClockEndpoint::clock),
        // Under the clock `created` is the clock's epoch, so answers are the same in every run.
        created_s: endpoint.as_ref().map(|_| crate::wire::clock::endpoint::DEFAULT_EPOCH_NS / 1_000_000_000),
        barrier: options.barrier,
        ..ServeOptions::default()
    };
    let server =
        Server::start(scenario, description.dialect(), serve).await.map_err(|e| DriveError::Setup(e.to_string()))?;
    let base = server.base_url();
    let model = scenario.session.model.clone().unwrap_or_else(|| "rehearsal".to_string());
    let mut env = description.env_for(&base, &model, &home, &workdir);
    if let (Some(endpoint), Some(setup)) = (&endpoint, &options.clock) {
        endpoint.set_http(vec![server.addr().to_string()]);
        clock_env(&mut env, &endpoint.env_value(), &setup.shim);
    }
    let clock = endpoint.as_ref().map(ClockEndpoint::clock);
    let mut turns = Vec::new();
    for (i, turn) in scenario.turns.iter().enumerate() {
        if options.interrupt.as_ref().is_some_and(|f| f.load(Ordering::SeqCst)) {
            break;
        }
        let args: Vec<String> = options
            .command
            .iter()
            .map(|a| substitute(a, &turn.user, i + 1, &scenario.session.id, &home, &workdir))
            .collect();
        match run_turn(program, &args, &env, &home, &workdir, options, clock.as_ref()).await {
            Ok(run) => turns.push(run),
            Err(e) => {
                let _ = server.finish(End::Caller).await;
                if let Some(endpoint) = endpoint {
                    endpoint.finish().await;
                }
                return Err(DriveError::NotRun(e));
            }
        }
    }
    // Every command has ended: the run is over. The script counts as ended if nothing it
    // must use is left (a moment for the last request's bookkeeping).
    let end = tokio::time::timeout(Duration::from_millis(20), server.done()).await.unwrap_or(End::Caller);
    let end = if end == End::Idle { End::Caller } else { end };
    let wire = server.finish(end).await;
    let clock = match endpoint {
        Some(endpoint) => Some(endpoint.finish().await),
        None => None,
    };
    let (verdict, notes) = verdict_of(scenario, description, &wire, &turns, clock.as_ref());
    Ok(Driven { verdict, turns, wire, notes, clock })
}

/// A finished run of `scenario` on `description` judged: the model-side oracles against the
/// runtime's own limits (less the oracles it turns off), the request checks, the script's use,
/// and each turn's end; with the notes of what was not judged. `rehearsal record` judges its
/// recording with the same function.
pub(crate) fn verdict_of(
    scenario: &Scenario,
    description: &RuntimeDescription,
    wire: &WireRun,
    turns: &[TurnRun],
    clock: Option<&crate::wire::clock::ClockReport>,
) -> (Verdict, Vec<String>) {
    let (judged, mut notes) = description.judged_as(scenario);
    let mut verdict = wire::judge(&judged, wire);
    verdict.run.elapsed = Duration::ZERO;
    for off in &description.oracles_off {
        // A finding names its clause in parentheses: `model-side NAME (oracle.model-side.NAME)`.
        let clause = format!("(oracle.model-side.{})", off.oracle);
        let before = verdict.failures.len();
        verdict.failures.retain(|f| !(f.kind == FailureKind::Oracle && f.what.contains(&clause)));
        let left_out = before - verdict.failures.len();
        let what = if left_out == 0 { String::new() } else { format!(" ({left_out} finding(s) left out)") };
        notes.push(format!(
            "oracle.model-side.{} is off for runtime `{}`{what}: {}",
            off.oracle, description.name, off.why
        ));
    }
    let mut turn_failures = Vec::new();
    if let Some(report) = clock {
        // Under the clock the run's length is its virtual end: the same in every run.
        verdict.run.elapsed = Duration::from_nanos(report.now_ns);
        match &report.end {
            ClockEnd::Finished { .. } => {}
            // The runtime's work was done: idle with nothing due is how it waits to exit.
            ClockEnd::Stuck { at_ns } if wire.end == End::Script => notes.push(format!(
                "the clock: idle with nothing due at {} virtual, after the script was used up",
                crate::wire::clock::seconds(*at_ns)
            )),
            end => turn_failures.push(Failure::new(
                FailureKind::Stopped,
                format!("the clock stopped following the runtime: {end}"),
                Vec::new(),
            )),
        }
    }
    if wire.requests == 0 {
        turn_failures.push(Failure::new(
            FailureKind::Stopped,
            "the runtime made no request to the model: it never called the server".to_string(),
            Vec::new(),
        ));
    }
    for (i, (turn, run)) in scenario.turns.iter().zip(turns).enumerate() {
        turn_failures.extend(judge_turn(i, turn, run));
    }
    if turns.len() < scenario.turns.len() {
        turn_failures.push(Failure::new(
            FailureKind::Stopped,
            format!("interrupted: {} of {} turns ran", turns.len(), scenario.turns.len()),
            Vec::new(),
        ));
    }
    // The command's end is the likely cause of the rest: first.
    turn_failures.append(&mut verdict.failures);
    verdict.failures = turn_failures;
    for place in wire::not_applied(scenario) {
        let judged_here = [".message:", ".message_contains:", ".status:"];
        if !judged_here.iter().any(|f| place.contains(f)) {
            notes.push(format!("not judged over the wire: {place}"));
        }
    }
    (verdict, notes)
}

/// Puts the clock into a runtime's environment: `REHEARSAL_CLOCK`, the shim first on
/// `PYTHONPATH` (before the description's or drive's own), `PYTHONHASHSEED=0`.
fn clock_env(env: &mut Vec<(String, String)>, clock: &str, shim: &Path) {
    let inherited = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PYTHONPATH")
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var("PYTHONPATH").ok())
        .filter(|v| !v.is_empty());
    env.retain(|(k, _)| !matches!(k.as_str(), "PYTHONPATH" | "REHEARSAL_CLOCK" | "PYTHONHASHSEED"));
    let shim = shim.to_string_lossy().into_owned();
    let path = match inherited {
        Some(rest) => format!("{shim}:{rest}"),
        None => shim,
    };
    env.push(("REHEARSAL_CLOCK".to_string(), clock.to_string()));
    env.push(("PYTHONPATH".to_string(), path));
    env.push(("PYTHONHASHSEED".to_string(), "0".to_string()));
}

/// The folder of the clock shim: `--clock-shim DIR` if given, else `$REHEARSAL_CLOCK_SHIM`,
/// else the crate's own `shims/python` (where it was built). `Err` names every place tried.
pub fn find_clock_shim(given: Option<&Path>) -> Result<PathBuf, String> {
    let mut tried = Vec::new();
    let candidates: Vec<(String, PathBuf)> = match given {
        Some(dir) => vec![("--clock-shim".to_string(), dir.to_path_buf())],
        None => {
            let mut out = Vec::new();
            if let Some(dir) = std::env::var_os("REHEARSAL_CLOCK_SHIM").filter(|d| !d.is_empty()) {
                out.push(("$REHEARSAL_CLOCK_SHIM".to_string(), PathBuf::from(dir)));
            }
            out.push((
                "the crate's shims/python".to_string(),
                Path::new(env!("CARGO_MANIFEST_DIR")).join("shims").join("python"),
            ));
            out
        }
    };
    for (from, dir) in candidates {
        if dir.join("sitecustomize.py").is_file() && dir.join("rehearsal_clock").is_dir() {
            return Ok(std::fs::canonicalize(&dir).unwrap_or(dir));
        }
        tried.push(format!("{from} {}", dir.display()));
    }
    Err(format!(
        "no clock shim (a folder with sitecustomize.py and rehearsal_clock/) at {}; give one with --clock-shim DIR or REHEARSAL_CLOCK_SHIM",
        tried.join(", ")
    ))
}

/// The turn's end judged: how the command ended, its stdout against `expect.message` and
/// `message_contains`, its exit code against `expect.status`.
fn judge_turn(i: usize, turn: &crate::scenario::Turn, run: &TurnRun) -> Vec<Failure> {
    let mut out = Vec::new();
    let tail = |s: &str| -> Vec<String> {
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(5)..].iter().map(|l| format!("stderr: {l}")).collect()
    };
    match &run.exited {
        Exited::TimedOut => out.push(Failure::new(
            FailureKind::Stopped,
            format!("turns[{i}]: the runtime passed the wall-clock limit; its process group was killed"),
            tail(&run.stderr),
        )),
        // The harness's stop, not the runtime's: the turn is not judged, and the run cannot
        // pass on a turn that never ended.
        Exited::Interrupted => out.push(Failure::new(
            FailureKind::Stopped,
            format!(
                "turns[{i}]: interrupted (Ctrl-C or a termination signal) before the runtime ended; its process group was killed and the turn is not judged"
            ),
            Vec::new(),
        )),
        Exited::ClockEnded => out.push(Failure::new(
            FailureKind::Stopped,
            format!("turns[{i}]: the runtime did not exit after the clock had ended; its process group was killed"),
            tail(&run.stderr),
        )),
        Exited::Signal(s) => out.push(Failure::new(
            FailureKind::Stopped,
            format!("turns[{i}]: the runtime died of signal {s}"),
            tail(&run.stderr),
        )),
        Exited::Code(code) => {
            let want = turn.expect.status;
            let ok = *code == 0;
            match want {
                Some(Status::Error) if ok => out.push(Failure::new(
                    FailureKind::Expectation,
                    format!("turns[{i}].expect.status: expected error (a non-zero exit), the runtime exited 0"),
                    Vec::new(),
                )),
                Some(Status::Error) => {}
                _ if !ok => out.push(Failure::new(
                    FailureKind::Expectation,
                    format!("turns[{i}]: the runtime exited {code}"),
                    tail(&run.stderr),
                )),
                _ => {}
            }
        }
    }
    let said = run.stdout.trim_end_matches(['\n', '\r']);
    if let Some(want) = &turn.expect.message {
        let want = want.render();
        if said != want {
            out.push(Failure::new(
                FailureKind::Expectation,
                format!(
                    "turns[{i}].expect.message: expected {}, the runtime printed {}",
                    crate::trace::quoted(&want),
                    crate::trace::quoted(said)
                ),
                Vec::new(),
            ));
        }
    }
    if let Some(want) = &turn.expect.message_contains {
        let want = want.render();
        if !said.contains(&want) {
            out.push(Failure::new(
                FailureKind::Expectation,
                format!(
                    "turns[{i}].expect.message_contains: {} is not in what the runtime printed, {}",
                    crate::trace::quoted(&want),
                    crate::trace::quoted(said)
                ),
                Vec::new(),
            ));
        }
    }
    out
}

/// Writes the scenario's profile files where a runtime looks for them:
/// `.agents/agents/NAME` in the working directory.
fn seed_files(scenario: &Scenario, workdir: &Path) -> Result<(), String> {
    if scenario.profile_files.is_empty() {
        return Ok(());
    }
    let dir = workdir.join(".agents").join("agents");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    for (name, text) in &scenario.profile_files {
        if name.contains('/') || name.contains('\\') || name.starts_with('.') {
            return Err(format!("profile_files: `{name}` is not a plain file name"));
        }
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Resolves once `flag` is set (Ctrl-C), looked at every 50 ms; never without a flag.
pub(crate) async fn interrupted(flag: Option<&Arc<AtomicBool>>) {
    match flag {
        Some(flag) => {
            while !flag.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        None => std::future::pending::<()>().await,
    }
}

/// Runs one turn's command to its end, the wall-clock limit or an interrupt, then kills its
/// process group. `Err`: it could not be started.
pub(crate) async fn run_turn(
    program: &str,
    args: &[String],
    env: &[(String, String)],
    home: &Path,
    workdir: &Path,
    options: &DriveOptions,
    clock: Option<&crate::wire::clock::Clock>,
) -> Result<TurnRun, String> {
    // A relative path with a separator would be resolved against the working directory set
    // below: resolve it against drive's own, as a shell would.
    let program: PathBuf = match Path::new(program) {
        p if p.is_relative() && p.components().count() > 1 => {
            std::env::current_dir().map(|d| d.join(p)).unwrap_or_else(|_| p.to_path_buf())
        }
        p => p.to_path_buf(),
    };
    let program = program.as_path();
    let mut command = tokio::process::Command::new(program);
    command
        .args(&args[1..])
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("HOME", home)
        .current_dir(workdir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    let tag = run_tag();
    command.env(&tag, "1");
    let started = tokio::time::Instant::now();
    let mut child = command.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("the runtime's command `{}` was not found", program.display()),
        _ => format!("the runtime's command `{}` failed to start: {e}", program.display()),
    })?;
    let pid = child.id();
    let max = options.output_max_bytes;
    let stdout = child.stdout.take().map(|s| Captured::start(s, max));
    let stderr = child.stderr.take().map(|s| Captured::start(s, max));
    let interrupted = interrupted(options.interrupt.as_ref());
    let exited = tokio::select! {
        status = child.wait() => match status {
            Ok(status) => exit_of(status),
            Err(_) => Exited::Signal(0),
        },
        _ = tokio::time::sleep(options.turn_limit) => Exited::TimedOut,
        _ = interrupted => Exited::Interrupted,
        // A clock that ended by itself no longer moves the runtime's time: it runs on real
        // time from there (the shim's `end`), and is given a moment to finish.
        () = async {
            match clock {
                Some(clock) => {
                    clock.ended().await;
                    if clock.end().is_some_and(|end| end.is_clean()) {
                        return std::future::pending().await;
                    }
                    tokio::time::sleep(options.clock.as_ref().map_or(Duration::ZERO, |c| c.end_grace)).await;
                }
                None => std::future::pending().await,
            }
        } => Exited::ClockEnded,
    };
    // The whole group goes, whether the command ended by itself or not: a grandchild it left
    // behind would otherwise keep running and hold its pipes open.
    kill_group(pid);
    let _ = child.kill().await;
    // A descendant that left the group still carries the turn's tag.
    kill_tagged(&tag).await;
    // Both pipes at once: a leftover holding both costs one wait, not two.
    let finish = |captured: Option<Captured>| async move {
        match captured {
            Some(captured) => captured.finish().await,
            None => String::new(),
        }
    };
    let (stdout, stderr) = tokio::join!(finish(stdout), finish(stderr));
    Ok(TurnRun { args: args.to_vec(), exited, stdout, stderr, elapsed: started.elapsed() })
}

/// A fresh tag for one turn's processes: an environment variable's name, unique to this
/// process and turn, so that nested or parallel drives never mistake each other's processes.
fn run_tag() -> String {
    static TURNS: AtomicU64 = AtomicU64::new(0);
    format!("REHEARSAL_RUN_TAG_{}_{}", std::process::id(), TURNS.fetch_add(1, Ordering::Relaxed))
}

/// One of a turn's output pipes, read as it comes into a buffer shared with the caller: what
/// arrived is kept even when a leftover process holds the pipe open past the end.
struct Captured {
    kept: Arc<std::sync::Mutex<Vec<u8>>>,
    reader: tokio::task::JoinHandle<()>,
}

impl Captured {
    fn start<R: tokio::io::AsyncRead + Unpin + Send + 'static>(r: R, max: usize) -> Captured {
        let kept = Arc::new(std::sync::Mutex::new(Vec::new()));
        let reader = tokio::spawn(read_capped(r, max, kept.clone()));
        Captured { kept, reader }
    }

    /// What was read: the reader is given a moment to reach the end of the pipe, then
    /// stopped; the bytes it read so far are kept either way.
    async fn finish(self) -> String {
        let mut reader = self.reader;
        if tokio::time::timeout(Duration::from_secs(2), &mut reader).await.is_err() {
            reader.abort();
        }
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        String::from_utf8_lossy(&kept).into_owned()
    }
}

async fn read_capped<R: tokio::io::AsyncRead + Unpin>(mut r: R, max: usize, kept: Arc<std::sync::Mutex<Vec<u8>>>) {
    let mut buf = [0u8; 8192];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let mut kept = kept.lock().unwrap_or_else(|p| p.into_inner());
                let room = max.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}

fn exit_of(status: std::process::ExitStatus) -> Exited {
    if let Some(code) = status.code() {
        return Exited::Code(code);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return Exited::Signal(signal);
        }
    }
    Exited::Signal(0)
}

/// Kills the process group `pid` leads (Unix); elsewhere nothing (the child is killed by the
/// caller).
fn kill_group(pid: Option<u32>) {
    #[cfg(unix)]
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()).filter(|p| *p > 0) {
        // SAFETY: kill(2) with a negative pid signals the group; it touches no memory of ours.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    #[cfg(not(unix))]
    let _ = pid;
}

/// Makes this process a child subreaper (Linux): a process whose parent dies while this one
/// is an ancestor is re-parented here instead of to init, so `drive` and `record` can reap the
/// leftovers of a runtime they kill. Called by the binary ([`crate::cli::main_with`]), never
/// by the library on its own. Elsewhere nothing.
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(PR_SET_CHILD_SUBREAPER) sets a flag of this process; it reads no memory.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// Kills every process whose environment carries `tag` (Linux, from `/proc`), in rounds until
/// none is left (a process may fork while it is being looked for), and reaps those that were
/// re-parented to this process. Elsewhere nothing: the group kill is all there is.
async fn kill_tagged(tag: &str) {
    #[cfg(target_os = "linux")]
    {
        let needle = format!("{tag}=1");
        let mut killed: Vec<i32> = Vec::new();
        // A bounded number of rounds: each kills what it finds; a new process can only come
        // from one not yet killed.
        for _ in 0..20 {
            let found = tagged_processes(needle.as_bytes());
            let fresh: Vec<i32> = found.into_iter().filter(|p| !killed.contains(p)).collect();
            if fresh.is_empty() {
                break;
            }
            for pid in &fresh {
                // SAFETY: kill(2) on a pid; it touches no memory of ours.
                unsafe {
                    libc::kill(*pid, libc::SIGKILL);
                }
            }
            killed.extend(fresh);
        }
        // Reap the ones that are now this process's children (as a subreaper): each is
        // waited for by its own pid, so no other child's status is taken from tokio.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while !killed.is_empty() && tokio::time::Instant::now() < deadline {
            killed.retain(|pid| {
                let mut status = 0;
                // SAFETY: waitpid(2) on one pid with WNOHANG writes only `status`.
                let got = unsafe { libc::waitpid(*pid, &mut status, libc::WNOHANG) };
                // 0: our child, not dead yet; -1: not our child (init reaps it) or gone.
                got == 0
            });
            if !killed.is_empty() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = tag;
}

/// The pids of the processes whose environment holds the entry `needle` (`NAME=VALUE`).
/// Processes of other users, and those gone while being read, are skipped.
#[cfg(target_os = "linux")]
fn tagged_processes(needle: &[u8]) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let me = std::process::id() as i32;
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|environ| environ.split(|b| *b == 0).any(|entry| entry == needle))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_once_each() {
        let got =
            substitute("t={turn} m={message} s={session}", "say {turn}", 2, "s-1", Path::new("/h"), Path::new("/w"));
        assert_eq!(got, "t=2 m=say {turn} s=s-1");
        assert_eq!(substitute("{home}/{workdir}", "", 1, "", Path::new("/h"), Path::new("/w")), "/h//w");
        assert_eq!(substitute("héllo {x}", "", 1, "", Path::new("/h"), Path::new("/w")), "héllo {x}");
    }
}

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
//! Processes: each turn's command runs in its own process group and temp home, and is killed
//! with every descendant at its end (`src/wire/process.rs` says how, and what escapes it).
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
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::judge::{Failure, FailureKind, Judgement};
use crate::scenario::Scenario;
use crate::sut::event::Status;
use crate::wire::clock::{ClockEnd, ClockEndpoint, ClockLimits, ClockOptions, ClockReport};
pub use crate::wire::process::{Exited, TurnRun, become_subreaper, find_clock_shim};
use crate::wire::process::{TempDir, Watch, clock_env, run_turn};
use crate::wire::runtime::RuntimeDescription;
use crate::wire::{self, End, ServeError, ServeOptions, Server, WireRun};

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

impl DriveOptions {
    /// How each turn's command is watched under these options.
    pub(crate) fn watch(&self) -> Watch {
        Watch {
            turn_limit: self.turn_limit,
            output_max_bytes: self.output_max_bytes,
            interrupt: self.interrupt.clone(),
            end_grace: self.clock.as_ref().map_or(Duration::ZERO, |c| c.end_grace),
        }
    }
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

/// Why a scenario could not be driven at all: the system under test could not be run
/// ([`DriveError::is_not_run`]), or the harness could not set up around it.
#[derive(Debug)]
pub enum DriveError {
    /// No command was given (after `--`).
    NoCommand,
    /// The runtime's command was not found.
    CommandNotFound {
        /// The command, as resolved.
        program: PathBuf,
    },
    /// The runtime's command failed to start.
    CommandFailed {
        /// The command, as resolved.
        program: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// No clock shim was found (a folder with `sitecustomize.py` and `rehearsal_clock/`).
    NoClockShim {
        /// Each place looked in: where it came from (`--clock-shim`, `$REHEARSAL_CLOCK_SHIM`,
        /// the crate's `shims/python`) and the folder.
        tried: Vec<(&'static str, PathBuf)>,
    },
    /// The temp folder could not be made.
    TempFolder {
        /// Why.
        source: std::io::Error,
    },
    /// A folder could not be made.
    MakeFolder {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file could not be written (a scenario's `profile_files`).
    WriteFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A `profile_files` name is not a plain file name.
    ProfileFileName {
        /// The name.
        name: String,
    },
    /// The clock endpoint could not be bound.
    ClockEndpoint {
        /// Why.
        source: std::io::Error,
    },
    /// The server could not start.
    Serve(ServeError),
}

impl DriveError {
    /// Whether the system under test could not be run (no command, or one not found or that
    /// failed to start), rather than the harness failing around it.
    pub fn is_not_run(&self) -> bool {
        matches!(self, DriveError::NoCommand | DriveError::CommandNotFound { .. } | DriveError::CommandFailed { .. })
    }
}

impl std::fmt::Display for DriveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DriveError::NoCommand => f.write_str("no command given after `--`"),
            DriveError::CommandNotFound { program } => {
                write!(f, "the runtime's command `{}` was not found", program.display())
            }
            DriveError::CommandFailed { program, source } => {
                write!(f, "the runtime's command `{}` failed to start: {source}", program.display())
            }
            DriveError::NoClockShim { tried } => {
                let tried: Vec<String> = tried.iter().map(|(from, dir)| format!("{from} {}", dir.display())).collect();
                write!(
                    f,
                    "no clock shim (a folder with sitecustomize.py and rehearsal_clock/) at {}; give one with --clock-shim DIR or REHEARSAL_CLOCK_SHIM",
                    tried.join(", ")
                )
            }
            DriveError::TempFolder { source } => write!(f, "cannot make a temp folder: {source}"),
            DriveError::MakeFolder { path, source } => write!(f, "cannot make {}: {source}", path.display()),
            DriveError::WriteFile { path, source } => write!(f, "cannot write {}: {source}", path.display()),
            DriveError::ProfileFileName { name } => write!(f, "profile_files: `{name}` is not a plain file name"),
            DriveError::ClockEndpoint { source } => write!(f, "cannot bind the clock endpoint: {source}"),
            DriveError::Serve(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for DriveError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DriveError::CommandFailed { source, .. }
            | DriveError::TempFolder { source }
            | DriveError::MakeFolder { source, .. }
            | DriveError::WriteFile { source, .. }
            | DriveError::ClockEndpoint { source } => Some(source),
            DriveError::Serve(e) => Some(e),
            DriveError::NoCommand
            | DriveError::CommandNotFound { .. }
            | DriveError::NoClockShim { .. }
            | DriveError::ProfileFileName { .. } => None,
        }
    }
}

/// A driven scenario: the verdict and what it was made of.
#[derive(Debug)]
pub struct Driven {
    /// What decides the verdict (its `elapsed` is zero: wall times vary, and a report must
    /// not); the caller adds what only it knows (the golden file, the orders it ran) and
    /// builds the verdict ([`Judgement::verdict`]).
    pub judgement: Judgement,
    /// Each turn's run.
    pub turns: Vec<TurnRun>,
    /// The served run.
    pub wire: WireRun,
    /// What was not judged, and why (expectations on core events, rules knobs replaced).
    pub notes: Vec<String>,
    /// Under the clock: how it ended, its virtual end, its transcript.
    pub clock: Option<ClockReport>,
}

/// Fills the placeholders of one argument.
#[doc(hidden)]
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
        return Err(DriveError::NoCommand);
    };
    let (description, limit_notes) = description.started_for(scenario);
    let description = &description;
    let temp = TempDir::new(options.temp_root.as_deref()).map_err(|source| DriveError::TempFolder { source })?;
    let home = temp.0.join("home");
    let workdir = temp.0.join("work");
    for dir in [&home, &workdir] {
        std::fs::create_dir_all(dir).map_err(|source| DriveError::MakeFolder { path: dir.clone(), source })?;
    }
    seed_files(scenario, &workdir)?;
    let endpoint = match &options.clock {
        Some(setup) => {
            let clock = ClockOptions {
                seed: setup.seed,
                tie_seed: setup.tie_seed,
                limits: setup.limits.clone(),
                ..ClockOptions::default()
            };
            Some(ClockEndpoint::bind(clock).await.map_err(|source| DriveError::ClockEndpoint { source })?)
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
        agent_header: description.agent_header.clone(),
        side: description.side_requests.clone(),
        ..ServeOptions::default()
    };
    let server = Server::start(scenario, description.dialect(), serve).await.map_err(DriveError::Serve)?;
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
        if i > 0 {
            server.turn_begins();
        }
        match run_turn(program, &args, &env, &home, &workdir, &options.watch(), clock.as_ref()).await {
            Ok(run) => turns.push(run),
            Err(e) => {
                let _ = server.finish(End::Caller).await;
                if let Some(endpoint) = endpoint {
                    endpoint.finish().await;
                }
                return Err(e);
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
    let (judgement, mut notes) = judged(scenario, description, &wire, &turns, clock.as_ref());
    notes.splice(0..0, limit_notes);
    Ok(Driven { judgement, turns, wire, notes, clock })
}

/// A finished run of `scenario` on `description` judged: the model-side oracles against the
/// runtime's own limits (less the oracles it turns off), the request checks, the script's use,
/// and each turn's end; with the notes of what was not judged. `rehearsal record` judges its
/// recording with the same function.
pub(crate) fn judged(
    scenario: &Scenario,
    description: &RuntimeDescription,
    wire: &WireRun,
    turns: &[TurnRun],
    clock: Option<&crate::wire::clock::ClockReport>,
) -> (Judgement, Vec<String>) {
    let (judged, mut notes) = description.judged_as(scenario);
    let mut judgement = wire::judgement(&judged, wire, &description.limits.request_limits);
    let mut elapsed = Duration::ZERO;
    for off in &description.oracles_off {
        let left_out = judgement.switch_off(&format!("oracle.model-side.{}", off.oracle));
        let what = if left_out == 0 { String::new() } else { format!(" ({left_out} finding(s) left out)") };
        notes.push(format!(
            "oracle.model-side.{} is off for runtime `{}`{what}: {}",
            off.oracle, description.name, off.why
        ));
    }
    let mut turn_failures = Vec::new();
    if let Some(report) = clock {
        // Under the clock the run's length is its virtual end: the same in every run.
        elapsed = Duration::from_nanos(report.now_ns);
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
    // A runtime that asked the model without ever greeting the clock cannot be followed on
    // virtual time: say why, before the stops it causes (a threaded runtime, or a command that
    // set PYTHONPATH over the shim's).
    if let Some(report) = clock
        && wire.requests > 0
        && !crate::wire::clock::VirtualClock::greeted(&report.transcript)
    {
        turn_failures.push(Failure::new(
            FailureKind::Stopped,
            format!(
                "the runtime made {} request(s) to the model but never said hello to the clock: under --clock it must \
                 load the clock shim (drive puts it first on PYTHONPATH; a command that sets PYTHONPATH itself hides it: \
                 put the runtime on the venv's path instead) and run on asyncio (a runtime that works in threads, as \
                 smolagents does, cannot follow the clock: drive it without --clock)",
                wire.requests
            ),
            Vec::new(),
        ));
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
    let judgement = judgement.elapsed(elapsed).first(turn_failures);
    let truth = wire::ground_truth(&wire.side, &wire.labels, &wire.agent_header);
    // A guess is reported by the attribution oracle; switched off, the guesses go silent.
    let silent = if description.oracles_off.iter().any(|o| o.oracle == "attribution") { truth.guessed } else { 0 };
    let doubts = format!(
        "{} ambiguous, {} by a shared start only (each a finding), {silent} silent guesses",
        truth.ambiguous, truth.guessed
    );
    if truth.compared() {
        notes.push(format!(
            "attribution against the runtime's {} header: {} requests right, {} wrong, {} unattributed, {} unlabelled, {doubts}",
            wire.agent_header.name,
            truth.right,
            truth.wrong.len(),
            truth.unattributed,
            truth.unlabelled
        ));
    } else if truth.ambiguous + truth.guessed > 0 {
        notes.push(format!("attribution: {doubts}"));
    }
    for place in wire::not_applied(scenario) {
        let judged_here = [".message:", ".message_contains:", ".status:"];
        if !judged_here.iter().any(|f| place.contains(f)) {
            notes.push(format!("not judged over the wire: {place}"));
        }
    }
    (judgement, notes)
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
fn seed_files(scenario: &Scenario, workdir: &Path) -> Result<(), DriveError> {
    if scenario.profile_files.is_empty() {
        return Ok(());
    }
    let dir = workdir.join(".agents").join("agents");
    std::fs::create_dir_all(&dir).map_err(|source| DriveError::MakeFolder { path: dir.clone(), source })?;
    for (name, text) in &scenario.profile_files {
        if name.contains('/') || name.contains('\\') || name.starts_with('.') {
            return Err(DriveError::ProfileFileName { name: name.clone() });
        }
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|source| DriveError::WriteFile { path: path.clone(), source })?;
    }
    Ok(())
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

    #[tokio::test]
    async fn a_command_that_is_not_there_is_not_run_and_named() {
        let scenario: Scenario = serde_json::from_str(r#"{"name":"s","lanes":[],"turns":[{"user":"hi"}]}"#).unwrap();
        let generic = RuntimeDescription::builtin("generic").unwrap();
        let err = drive(&scenario, &generic, &DriveOptions::default()).await.unwrap_err();
        assert!(matches!(err, DriveError::NoCommand) && err.is_not_run(), "{err:?}");
        let temp = std::env::temp_dir();
        let watch = DriveOptions::default().watch();
        let args = vec!["/no/such/runtime".to_string()];
        let err = run_turn("/no/such/runtime", &args, &[], &temp, &temp, &watch, None).await.unwrap_err();
        assert!(
            matches!(&err, DriveError::CommandNotFound { program } if program == Path::new("/no/such/runtime")),
            "{err:?}"
        );
        assert!(err.is_not_run());
        assert_eq!(err.to_string(), "the runtime's command `/no/such/runtime` was not found");
    }

    #[test]
    fn a_clock_shim_not_found_names_every_place_tried() {
        let err = find_clock_shim(Some(Path::new("/no/such/shim"))).unwrap_err();
        let DriveError::NoClockShim { tried } = &err else { panic!("{err:?}") };
        assert_eq!(tried, &vec![("--clock-shim", PathBuf::from("/no/such/shim"))]);
        assert!(!err.is_not_run());
        assert_eq!(
            err.to_string(),
            "no clock shim (a folder with sitecustomize.py and rehearsal_clock/) at --clock-shim /no/such/shim; give one with --clock-shim DIR or REHEARSAL_CLOCK_SHIM"
        );
    }

    #[test]
    fn a_profile_file_outside_its_folder_is_refused_by_name() {
        let mut scenario: Scenario =
            serde_json::from_str(r#"{"name":"s","lanes":[],"turns":[{"user":"hi"}]}"#).unwrap();
        scenario.profile_files.insert("../x.md".into(), "x".into());
        let dir = std::env::temp_dir().join(format!("rehearsal-seed-{}", std::process::id()));
        let err = seed_files(&scenario, &dir).unwrap_err();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(matches!(&err, DriveError::ProfileFileName { name } if name == "../x.md"), "{err:?}");
        assert_eq!(err.to_string(), "profile_files: `../x.md` is not a plain file name");
    }
}

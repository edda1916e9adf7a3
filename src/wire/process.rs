//! The processes of an outside runtime: one turn's command started in its own process group
//! and temp home, watched to its end, a wall-clock limit or an interrupt, and killed with
//! every descendant; the clock shim found and put into its environment.
//!
//! On Unix each turn's command leads a new process group (`process_group(0)`) and carries a
//! tag of its own in its environment (`REHEARSAL_RUN_TAG_<pid>_<n>=1`, inherited by every
//! descendant). When the command exits, passes the wall-clock limit or the caller is
//! interrupted, the whole group is killed (SIGKILL), and then, on Linux, every process still
//! carrying the turn's tag, which finds a descendant that left the group (`setsid`, a
//! daemon's double fork) too. The `rehearsal` binary ([`crate::cli::main_with`]) also makes
//! itself a child subreaper (`PR_SET_CHILD_SUBREAPER`, [`become_subreaper`]), so such orphans
//! are re-parented to it rather than to init, and reaps those it kills. A library user's test
//! binary is not made a subreaper (that is a process-wide setting its owner decides): the tag
//! still finds and kills the leftovers, and init reaps them. A descendant that both leaves the
//! group and clears its environment is beyond both. Other Unix systems get the group kill
//! only; platforms without process groups kill only the command itself. What a turn printed
//! is kept up to the moment of the kill, even when a leftover held the pipe.
//!
//! What this module deliberately does not do: serve the model, judge a turn, or read a
//! scenario: `drive` and `record` decide what to run and what it means.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::AsyncReadExt;

use crate::wire::clock::Clock;
use crate::wire::drive::DriveError;

/// How one turn's command is watched: its limits and what may stop it from outside.
#[derive(Clone, Debug)]
pub(crate) struct Watch {
    /// The wall-clock limit of the command; past it the group is killed.
    pub(crate) turn_limit: Duration,
    /// The most bytes kept of its stdout and of its stderr.
    pub(crate) output_max_bytes: usize,
    /// Set from outside (Ctrl-C): the command's group is killed.
    pub(crate) interrupt: Option<Arc<AtomicBool>>,
    /// After the clock ended by itself, how long (wall time) the command is given to exit.
    pub(crate) end_grace: Duration,
}

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
    /// `ClockDrive::end_grace`.
    ClockEnded,
}

/// One turn's run of the command.
#[derive(Clone, Debug)]
pub struct TurnRun {
    /// The arguments as run, placeholders filled.
    pub args: Vec<String>,
    /// How it ended.
    pub exited: Exited,
    /// Its stdout (lossy UTF-8, at most `DriveOptions::output_max_bytes`).
    pub stdout: String,
    /// Its stderr, likewise.
    pub stderr: String,
    /// Wall time it ran.
    pub elapsed: Duration,
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

/// Puts the clock into a runtime's environment: `REHEARSAL_CLOCK`, the shim first on
/// `PYTHONPATH` (before the description's or drive's own), `PYTHONHASHSEED=0`.
pub(crate) fn clock_env(env: &mut Vec<(String, String)>, clock: &str, shim: &Path) {
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
pub fn find_clock_shim(given: Option<&Path>) -> Result<PathBuf, DriveError> {
    let mut tried = Vec::new();
    let candidates: Vec<(&'static str, PathBuf)> = match given {
        Some(dir) => vec![("--clock-shim", dir.to_path_buf())],
        None => {
            let mut out = Vec::new();
            if let Some(dir) = std::env::var_os("REHEARSAL_CLOCK_SHIM").filter(|d| !d.is_empty()) {
                out.push(("$REHEARSAL_CLOCK_SHIM", PathBuf::from(dir)));
            }
            out.push(("the crate's shims/python", Path::new(env!("CARGO_MANIFEST_DIR")).join("shims").join("python")));
            out
        }
    };
    for (from, dir) in candidates {
        if dir.join("sitecustomize.py").is_file() && dir.join("rehearsal_clock").is_dir() {
            return Ok(std::fs::canonicalize(&dir).unwrap_or(dir));
        }
        tried.push((from, dir));
    }
    Err(DriveError::NoClockShim { tried })
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
    watch: &Watch,
    clock: Option<&Clock>,
) -> Result<TurnRun, DriveError> {
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
    let mut child = command.spawn().map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => DriveError::CommandNotFound { program: program.to_path_buf() },
        _ => DriveError::CommandFailed { program: program.to_path_buf(), source },
    })?;
    let pid = child.id();
    let max = watch.output_max_bytes;
    let stdout = child.stdout.take().map(|s| Captured::start(s, max));
    let stderr = child.stderr.take().map(|s| Captured::start(s, max));
    let interrupted = interrupted(watch.interrupt.as_ref());
    let exited = tokio::select! {
        status = child.wait() => match status {
            Ok(status) => exit_of(status),
            Err(_) => Exited::Signal(0),
        },
        _ = tokio::time::sleep(watch.turn_limit) => Exited::TimedOut,
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
                    tokio::time::sleep(watch.end_grace).await;
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

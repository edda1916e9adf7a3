//! `rehearsal record`: a real run captured as a scenario. The proxy of [`proxy`]
//! stands between the runtime and the upstream model; the runtime's command runs once per
//! turn as under `rehearsal drive` (or, in the plain proxy form, the runtime is started by
//! hand and the recording ends on Ctrl-C or the idle limit). Then this module:
//!
//! 1. attributes every recorded request (the same attributor a served run uses, fed the
//!    arrivals and replies in the order they happened);
//! 2. writes a scenario in the format of `scenarios/`: one lane per agent (selected by
//!    `task_contains` of its task when the children's tasks are distinct, otherwise by alias),
//!    the replies as the upstream gave them (errors, hangs and dropped streams as their
//!    scripted kinds), latencies as measured (wall times, rounded), the turns with what the
//!    runtime printed, a `check.first_message` on each child's first request, and on every
//!    reply a `check.recorded` holding the request as it was sent, its volatile spans named;
//! 3. blanks every secret before anything is written (the auth headers' values wherever they
//!    appear, the [`DEFAULT_REDACT`] patterns and the caller's, one path for all);
//! 4. reads the file back through the front door (so it is a scenario `rehearsal run` and
//!    `drive` accept), feeds the recording to its script, and judges that with the model-side
//!    oracles and the turns' expectations: which rules the real run broke.
//!
//! What this module deliberately does not do: forward requests (the proxy does), judge a rule
//! (the oracles do), or parse the command line (the CLI does). Wire times are wall times: a
//! recording is not deterministic, its replay is as deterministic as `drive` is.

#[doc(hidden)]
pub mod proxy;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::evidence::attribution::{Attribution, Attributor};
use crate::judge::Verdict;
use crate::scenario::{Scenario, ScenarioError};
use crate::sut::llm::Role;
use crate::wire::ServeError;
use crate::wire::WireRun;
use crate::wire::drive::{DriveError, DriveOptions};
use crate::wire::process::{Exited, TempDir, TurnRun};
use crate::wire::runtime::RuntimeDescription;
use proxy::{Event, Outcome, Proxy, ProxyOptions, Recording};

/// Patterns of secrets blanked in every recording, whatever `--redact` adds: OpenAI-style
/// keys (`sk-...`, which covers Anthropic's `sk-ant-api03-...` and `sk-ant-oat01-...`),
/// bearer tokens, and `api_key` fields written inside a text.
#[doc(hidden)]
pub const DEFAULT_REDACT: [&str; 3] = [
    r"sk-[A-Za-z0-9_\-]{8,}",
    r"(?i)bearer\s+[A-Za-z0-9._~+/=\-]{8,}",
    r#"(?i)"?api[_-]?key"?\s*[:=]\s*"?[A-Za-z0-9._\-]{8,}"?"#,
];

/// What a secret becomes in the file.
#[doc(hidden)]
pub const REDACTED: &str = "[redacted]";

/// Volatile spans every recording names (besides `--volatile`): the date bub writes into
/// every user message, and the temp folders `drive` and `record` run a runtime in.
#[doc(hidden)]
pub const DEFAULT_VOLATILE: [&str; 2] = [r"---Date: [^\n]*?---", r"[^\s'`]*rehearsal-drive-[0-9]+-[0-9]+"];

/// Object keys whose string values are credentials, wherever they stand (case ignored).
const SECRET_KEYS: [&str; 8] =
    ["api_key", "apikey", "api-key", "x-api-key", "authorization", "password", "secret", "access_token"];

/// How a run is recorded. Every limit is named here with its default.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// The upstream model's base URL (`http://HOST:PORT/v1`; plain http only).
    pub upstream: String,
    /// The runtime's command (with drive's placeholders); empty: the plain proxy form.
    pub command: Vec<String>,
    /// The user turns (the command runs once per turn with `{message}`).
    pub messages: Vec<String>,
    /// The scenario's name. Default: the output file's stem.
    pub name: String,
    /// The `session.id` written (and `{session}` of the command). Default `recorded`.
    pub session: String,
    /// Extra secret patterns (regular expressions), blanked as the defaults are.
    pub redact: Vec<String>,
    /// Extra volatile patterns written into every `check.recorded`.
    pub volatile: Vec<String>,
    /// Latencies are rounded to a multiple of this many milliseconds. Default 10.
    pub latency_round_ms: u64,
    /// The key the proxy sends upstream instead of the runtime's auth headers. Default none.
    pub upstream_key: Option<String>,
    /// How long the proxy waits for an upstream answer before recording a `hang`. Default 300 s.
    pub upstream_timeout: Duration,
    /// How long the upstream may send nothing mid-answer before it is recorded as a `hang`.
    /// Default 60 s.
    pub upstream_idle: Duration,
    /// The most bytes of one upstream answer the recording keeps; the runtime still gets all
    /// of it. Default 16 MiB.
    pub max_reply_bytes: usize,
    /// The plain form ends when no request arrived and none was open for this long. Default 30 s.
    pub idle_limit: Duration,
    /// The wall-clock limit of one turn's command. Default 60 s.
    pub turn_limit: Duration,
    /// The proxy's port on 127.0.0.1 (0: a free one).
    pub port: u16,
    /// Set from outside (Ctrl-C): the command's group is killed, the plain form ends.
    pub interrupt: Option<Arc<AtomicBool>>,
    /// Where the temp folders are made. Default: the system's temp folder.
    pub temp_root: Option<PathBuf>,
}

impl Default for RecordOptions {
    fn default() -> RecordOptions {
        RecordOptions {
            upstream: String::new(),
            command: Vec::new(),
            messages: Vec::new(),
            name: "recorded".into(),
            session: "recorded".into(),
            redact: Vec::new(),
            volatile: Vec::new(),
            latency_round_ms: 10,
            upstream_key: None,
            upstream_timeout: Duration::from_secs(300),
            upstream_idle: Duration::from_secs(60),
            max_reply_bytes: 16 << 20,
            idle_limit: Duration::from_secs(30),
            turn_limit: Duration::from_secs(60),
            port: 0,
            interrupt: None,
            temp_root: None,
        }
    }
}

/// Why a run could not be recorded.
#[derive(Debug)]
pub enum RecordError {
    /// A `--redact` or `--volatile` pattern is not a regular expression (or too big).
    Pattern {
        /// The flag (`--redact`, `--volatile`).
        flag: &'static str,
        /// The pattern.
        pattern: String,
        /// The regular expression's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The proxy could not start: an unusable `--upstream`, a port that cannot be bound.
    Proxy(ServeError),
    /// The runtime's command was not found or failed to start
    /// ([`DriveError::is_not_run`]), or its temp folders could not be made.
    Run(DriveError),
    /// No model request (of any API the proxy forwards) came through it: nothing to record.
    NothingRecorded {
        /// The last lines (at most 5) of each turn's stderr, in order: the runtime's own words.
        stderr_tail: Vec<String>,
    },
    /// The file could not be written.
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file written is not a scenario the front door accepts (a bug of the writer).
    Written(ScenarioError),
    /// The file's script, fed the recording it was written from, does not give back what was
    /// recorded: the writer and the recording differ, which is rehearsal's own bug, never the
    /// runtime's. Each entry names an exchange and the difference.
    Inconsistent {
        /// The file written (kept, for the bug report).
        file: PathBuf,
        /// Each difference, naming its exchange.
        differences: Vec<String>,
    },
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::Pattern { flag, pattern, source } => write!(f, "{flag} {pattern:?}: {source}"),
            RecordError::Proxy(e) => e.fmt(f),
            RecordError::Run(e) => e.fmt(f),
            RecordError::NothingRecorded { stderr_tail } => {
                f.write_str(
                    "no model request (a chat completion, a message or a response) came through the proxy: nothing to record (is the runtime's base URL the proxy's?)",
                )?;
                stderr_tail.iter().try_for_each(|line| write!(f, "\n  stderr: {line}"))
            }
            RecordError::Write { path, source } => write!(f, "cannot write {}: {source}", path.display()),
            RecordError::Written(e) => write!(f, "the recording written is not a valid scenario: {e}"),
            RecordError::Inconsistent { file, differences } => write!(
                f,
                "internal error: {} does not play back the run it was written from (a bug of rehearsal's recording writer, not of the runtime; the file is kept for a bug report): {}",
                file.display(),
                differences.join("; ")
            ),
        }
    }
}

impl std::error::Error for RecordError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RecordError::Pattern { source, .. } => Some(&**source),
            RecordError::Proxy(e) => Some(e),
            RecordError::Run(e) => Some(e),
            RecordError::Write { source, .. } => Some(source),
            RecordError::Written(e) => Some(e),
            RecordError::NothingRecorded { .. } | RecordError::Inconsistent { .. } => None,
        }
    }
}

/// A recorded run.
#[derive(Debug)]
pub struct Recorded {
    /// The scenario as read back from the file.
    pub scenario: Scenario,
    /// The file's text.
    pub text: String,
    /// The recording judged: the rules the real run broke.
    pub verdict: Verdict,
    /// What was not judged, and what the writer left out.
    pub notes: Vec<String>,
    /// Each turn's run of the command (none in the plain form).
    pub turns: Vec<TurnRun>,
    /// What the proxy saw.
    pub recording: Recording,
    /// The recording played through the scenario's script.
    pub wire: WireRun,
}

/// Records a run of `description`'s runtime against the upstream and writes the scenario to
/// `out`. `ready` is told the proxy's base URL once it listens (the plain form prints it).
/// Must be called inside a tokio runtime with I/O and time enabled.
pub async fn record(
    description: &RuntimeDescription,
    options: &RecordOptions,
    out: &Path,
    ready: impl FnOnce(&str),
) -> Result<Recorded, RecordError> {
    let redact =
        patterns(DEFAULT_REDACT.iter().map(|p| p.to_string()).chain(options.redact.iter().cloned()), "--redact")?;
    patterns(options.volatile.iter().cloned(), "--volatile")?;
    let proxy = Proxy::start(ProxyOptions {
        upstream: options.upstream.clone(),
        port: options.port,
        upstream_key: options.upstream_key.clone(),
        upstream_timeout: options.upstream_timeout,
        upstream_idle: options.upstream_idle,
        max_reply_bytes: options.max_reply_bytes,
        idle_limit: options.idle_limit,
        ..ProxyOptions::default()
    })
    .await
    .map_err(RecordError::Proxy)?;
    let base = proxy.base_url();
    ready(&base);
    let mut turns = Vec::new();
    if options.command.is_empty() {
        let interrupted = crate::wire::process::interrupted(options.interrupt.as_ref());
        tokio::select! {
            _ = proxy.idle() => {}
            _ = interrupted => {}
        }
    } else {
        let temp = TempDir::new(options.temp_root.as_deref())
            .map_err(|source| RecordError::Run(DriveError::TempFolder { source }))?;
        let (home, workdir) = (temp.0.join("home"), temp.0.join("work"));
        for dir in [&home, &workdir] {
            std::fs::create_dir_all(dir)
                .map_err(|source| RecordError::Run(DriveError::MakeFolder { path: dir.clone(), source }))?;
        }
        let model = "rehearsal";
        let env = description.env_for(&base, model, &home, &workdir);
        let drive = DriveOptions {
            command: options.command.clone(),
            turn_limit: options.turn_limit,
            interrupt: options.interrupt.clone(),
            ..DriveOptions::default()
        };
        for (i, message) in options.messages.iter().enumerate() {
            if options.interrupt.as_ref().is_some_and(|f| f.load(Ordering::SeqCst)) {
                break;
            }
            let args: Vec<String> = options
                .command
                .iter()
                .map(|a| crate::wire::drive::substitute(a, message, i + 1, &options.session, &home, &workdir))
                .collect();
            match crate::wire::process::run_turn(&args[0], &args, &env, &home, &workdir, &drive.watch(), None).await {
                Ok(run) => turns.push(run),
                Err(e) => {
                    let _ = proxy.finish(Duration::ZERO).await;
                    return Err(RecordError::Run(e));
                }
            }
        }
    }
    // The runtime is done: a request still open is held by no one (a moment for the last
    // answer's bookkeeping).
    let recording = proxy.finish(Duration::from_millis(200)).await;
    if recording.exchanges.is_empty() {
        // Nothing to write: a scenario needs its root's lane. The runtime's own words say why.
        let stderr_tail: Vec<String> = turns
            .iter()
            .flat_map(|t| t.stderr.lines().rev().take(5).collect::<Vec<_>>().into_iter().rev())
            .map(str::to_string)
            .collect();
        return Err(RecordError::NothingRecorded { stderr_tail });
    }
    let mut notes = recording.notes.clone();
    // The upstream's own failures are counted: the runtime got a 502 error object for each,
    // which the file scripts as that error, and the verdict must not hide them.
    let unreachable: Vec<String> = recording
        .exchanges
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            matches!(&e.outcome, Outcome::Error { status: 502, message, .. } if message.starts_with("rehearsal record: "))
        })
        .map(|(n, _)| n.to_string())
        .collect();
    if !unreachable.is_empty() {
        notes.push(format!(
            "{} requests could not reach the upstream and were answered with a 502 error object (exchanges {}); the file scripts them as that error",
            unreachable.len(),
            unreachable.join(", ")
        ));
    }
    // A key the runtime description itself sets (`OPENAI_API_KEY=rehearsal`) is a public
    // placeholder, not a secret: blanking it would blank every word it is.
    let public: Vec<String> = description.env.values().cloned().collect();
    let secrets: Vec<String> = recording.secrets.iter().filter(|s| !public.contains(s)).cloned().collect();
    // What a scenario can hold of the recording: the file and the writer's own check below
    // both read this, so what it leaves out is a note, never a difference.
    let recording = representable(&recording, &mut notes);
    let value = scenario_value(description, options, &recording, &turns, &secrets, &mut notes);
    let value = redacted(value, &secrets, &redact);
    let text = layout(&value);
    std::fs::write(out, &text).map_err(|source| RecordError::Write { path: out.to_path_buf(), source })?;
    let vocabulary = description.dialect().vocabulary();
    let scenario = crate::load::outside_for(out, &vocabulary).map_err(RecordError::Written)?.into_parts().0;
    // The writer's own guard: the file's script fed the recording as the file holds it
    // (secrets blanked the same way) must give back every reply recorded and pass every
    // request check it wrote. A difference is the writer's bug, reported as such, never a
    // rule the real run broke.
    let blanked = redacted_recording(&recording, &secrets, &redact);
    let wire = proxy::played(&scenario, description.dialect(), &blanked);
    if !wire.failed_checks.is_empty() {
        // The differences quote requests: blanked like the file, so this message leaks nothing.
        let differences = wire
            .failed_checks
            .iter()
            .map(|d| match redacted(Value::String(d.clone()), &secrets, &redact) {
                Value::String(d) => d,
                _ => unreachable!("a string is redacted to a string"),
            })
            .collect();
        return Err(RecordError::Inconsistent { file: out.to_path_buf(), differences });
    }
    let shown: Vec<TurnRun> = if turns.is_empty() {
        // The plain form knows no turn's end: the turns written expect nothing.
        scenario
            .turns
            .iter()
            .map(|_| TurnRun {
                args: Vec::new(),
                exited: Exited::Code(0),
                stdout: String::new(),
                stderr: String::new(),
                elapsed: Duration::ZERO,
            })
            .collect()
    } else {
        turns.clone()
    };
    let (judgement, judged_notes) = crate::wire::drive::judged(&scenario, description, &wire, &shown, None);
    let verdict = judgement.verdict();
    notes.extend(judged_notes);
    // Notes quote what the upstream and the runtime sent: printed, so blanked like the file.
    let notes = notes
        .into_iter()
        .map(|n| match redacted(Value::String(n), &secrets, &redact) {
            Value::String(n) => n,
            _ => unreachable!("a string is redacted to a string"),
        })
        .collect();
    Ok(Recorded { scenario, text, verdict, notes, turns, recording, wire })
}

fn patterns(list: impl Iterator<Item = String>, flag: &'static str) -> Result<Vec<regex::Regex>, RecordError> {
    list.map(|pattern| match crate::scenario::volatile_regex(&pattern) {
        Ok(regex) => Ok(regex),
        Err(e) => Err(RecordError::Pattern { flag, pattern, source: Box::new(e) }),
    })
    .collect()
}

fn round(ms: u128, to: u64) -> u64 {
    let ms = u64::try_from(ms).unwrap_or(u64::MAX);
    if to <= 1 {
        return ms;
    }
    (ms.saturating_add(to / 2) / to).saturating_mul(to)
}

/// The scenario of a recording, as a JSON value (before redaction).
fn scenario_value(
    description: &RuntimeDescription,
    options: &RecordOptions,
    recording: &Recording,
    turns: &[TurnRun],
    secrets: &[String],
    notes: &mut Vec<String>,
) -> Value {
    // Attributed as a live attributor would have: arrivals and replies in their order.
    let mut attributor = Attributor::new(Arc::new(description.dialect()), Vec::new());
    let mut attributions = vec![None; recording.exchanges.len()];
    for event in &recording.events {
        match *event {
            Event::Arrived(n) => {
                let e = &recording.exchanges[n];
                let tools = e.converted.tools.iter().map(|t| t.name.clone()).collect();
                let (number, a) =
                    attributor.request(&e.converted.system, &e.converted.messages, tools, e.model.clone(), e.arrived);
                attributor.reasoning_effort(number, e.converted.reasoning_effort.clone());
                attributions[n] = Some(a);
            }
            Event::Replied(n) => {
                let e = &recording.exchanges[n];
                if let Outcome::Reply { text, calls } = &e.outcome {
                    let message = crate::sut::llm::Message::assistant(text.clone(), proxy::calls_of(calls));
                    attributor.replied(n, &message, e.ended.unwrap_or(e.arrived));
                }
            }
            Event::Failed(n) => attributor.failed(n),
        }
    }
    // Each agent with its exchanges in arrival order.
    let mut agents: Vec<(String, String, Vec<usize>)> = Vec::new();
    for (n, a) in attributions.iter().enumerate() {
        match a {
            Some(Attribution::Agent(a)) => {
                let alias = a.alias.to_string();
                match agents.iter_mut().find(|(al, _, _)| *al == alias) {
                    Some(agent) => agent.2.push(n),
                    None => agents.push((alias, a.goal.to_string(), vec![n])),
                }
            }
            Some(Attribution::Unattributed(why)) => {
                notes.push(format!("exchange {n} was put down to no agent and is not in the scenario: {why}"));
            }
            Some(Attribution::Side(_)) | None => {}
        }
    }
    // In alias order (main, main/1, main/2, main/1/1 after main/1...), which follows the
    // spawn calls, not the race of parallel children to ask first: two recordings of the same
    // run write their lanes in the same order.
    let key = |alias: &str| -> Vec<u64> { alias.split('/').skip(1).map(|n| n.parse().unwrap_or(u64::MAX)).collect() };
    agents.sort_by_key(|(alias, _, _)| key(alias));
    let children: Vec<&String> = agents.iter().filter(|(al, _, _)| al != "main").map(|(_, g, _)| g).collect();
    // `task_contains` selects every child whose task holds the text: only tasks no other
    // child's task contains can stand for their agent.
    let distinct = children.iter().enumerate().all(|(i, g)| {
        !g.trim().is_empty() && children.iter().enumerate().all(|(j, h)| i == j || !h.contains(g.as_str()))
    });
    let volatile: Vec<String> =
        DEFAULT_VOLATILE.iter().map(|p| p.to_string()).chain(options.volatile.iter().cloned()).collect();
    // Secrets in a request are blanked in the file: on replay the same spans must compare
    // equal, so the redaction patterns (and the blank itself) are volatile too.
    let with_source = |list: Vec<String>| -> Vec<(String, regex::Regex)> {
        list.into_iter().filter_map(|p| crate::scenario::volatile_regex(&p).ok().map(|re| (p, re))).collect()
    };
    let volatile_res = with_source(volatile.clone());
    let secret_res =
        with_source(DEFAULT_REDACT.iter().map(|p| p.to_string()).chain(options.redact.iter().cloned()).collect());
    let compiled: Vec<regex::Regex> = volatile.iter().filter_map(|p| crate::scenario::volatile_regex(p).ok()).collect();
    let is_volatile = |t: &str| compiled.iter().any(|re| re.is_match(t));
    let mut tools: Vec<String> = Vec::new();
    let mut lanes = Vec::new();
    // What the file's limits must allow: its longest text, the first messages' texts together
    // (request checks are summed), its most calls in one reply.
    let (mut longest, mut first_texts, mut most_calls) = (0usize, 0usize, 0usize);
    for (alias, goal, exchanges) in &agents {
        let mut lane = Map::new();
        if alias != "main" && distinct {
            lane.insert("task_contains".into(), json!(goal));
        } else {
            lane.insert("agent".into(), json!(alias));
        }
        let mut replies = Vec::new();
        for (k, &n) in exchanges.iter().enumerate() {
            let e = &recording.exchanges[n];
            let mut reply = Map::new();
            let (text, calls, extra) = match &e.outcome {
                Outcome::Reply { text, calls } => (Some(text.clone()), calls.clone(), None),
                Outcome::Dropped { chunks, text, calls } => {
                    (Some(text.clone()), calls.clone(), Some(("drop_after_chunks", json!(chunks))))
                }
                Outcome::Error { status, kind, message } => {
                    reply.insert("error".into(), json!(message));
                    reply.insert("error_status".into(), json!((*status).clamp(400, 599)));
                    if let Some(kind) = kind {
                        reply.insert("error_type".into(), json!(kind));
                    }
                    (None, Vec::new(), None)
                }
                Outcome::Hang | Outcome::Open => {
                    reply.insert("hang".into(), json!(true));
                    (None, Vec::new(), None)
                }
            };
            if let Some(text) = text
                && (!text.is_empty() || calls.is_empty())
            {
                longest = longest.max(text.chars().count());
                reply.insert("text".into(), json!(text));
            }
            most_calls = most_calls.max(calls.len());
            if !calls.is_empty() {
                let written: Vec<Value> = proxy::calls_of(&calls)
                    .into_iter()
                    .map(|c| {
                        let mut call = Map::new();
                        call.insert("tool".into(), json!(c.name));
                        // `representable` made every call's arguments an object.
                        let args = match &*c.args {
                            Value::Object(_) => (*c.args).clone(),
                            _ => json!({}),
                        };
                        match crate::scenario::builtin_call_fits(&c.name, &args) {
                            Some(true) => {}
                            Some(false) => {
                                call.insert("bad_args".into(), json!(true));
                            }
                            None if !tools.contains(&c.name) => tools.push(c.name.clone()),
                            None => {}
                        }
                        if args.as_object().is_some_and(|o| !o.is_empty()) {
                            call.insert("args".into(), args);
                        }
                        Value::Object(call)
                    })
                    .collect();
                reply.insert("calls".into(), Value::Array(written));
            }
            if let Some((key, value)) = extra {
                reply.insert(key.into(), value);
            }
            // A hang's time is the client's patience, not the model's: a scripted hang holds
            // until the client gives up anyway.
            let hang = matches!(e.outcome, Outcome::Hang | Outcome::Open);
            let latency = match e.ended {
                Some(end) if !hang => round(end.saturating_sub(e.arrived).as_millis(), options.latency_round_ms),
                _ => 0,
            };
            if latency > 0 {
                reply.insert("latency_ms".into(), json!(latency));
            }
            let mut check = Map::new();
            let first = e.converted.messages.first().map(|m| m.content.clone()).unwrap_or_default();
            let ceiling = crate::scenario::CEILINGS.max_text_chars;
            let first_chars = first.chars().count();
            if k == 0 && alias != "main" && !is_volatile(&first) && first_texts + first_chars <= ceiling {
                first_texts += first_chars;
                longest = longest.max(first_chars);
                check.insert("first_message".into(), json!(first));
            }
            let recorded = recorded_request(&e.converted, &volatile_res, &secret_res, secrets);
            let recorded_longest = e.converted.messages.iter().map(|m| m.content.chars().count()).max().unwrap_or(0);
            if recorded_longest <= ceiling {
                longest = longest.max(recorded_longest);
                check.insert("recorded".into(), recorded);
            } else {
                notes.push(format!(
                    "exchange {n}: its request holds a message of {recorded_longest} characters, more than any file may hold ({ceiling}): its check.recorded is left out"
                ));
            }
            reply.insert("check".into(), Value::Object(check));
            replies.push(Value::Object(reply));
        }
        lane.insert("replies".into(), Value::Array(replies));
        lanes.push(Value::Object(lane));
    }
    let written_turns: Vec<Value> = if turns.is_empty() {
        root_turns(recording, &attributions)
    } else {
        options
            .messages
            .iter()
            .zip(turns)
            .map(|(message, run)| {
                let mut expect = Map::new();
                let said = run.stdout.trim_end_matches(['\n', '\r']);
                match run.exited {
                    Exited::Code(0) if !said.is_empty() && !is_volatile(said) => {
                        expect.insert("message".into(), json!(said));
                    }
                    Exited::Code(0) => {}
                    _ => {
                        expect.insert("status".into(), json!("error"));
                    }
                }
                let mut turn = Map::new();
                turn.insert("user".into(), json!(message));
                if !expect.is_empty() {
                    turn.insert("expect".into(), Value::Object(expect));
                }
                Value::Object(turn)
            })
            .collect()
    };
    let agents_named: Vec<&str> = agents.iter().map(|(a, _, _)| a.as_str()).collect();
    let how = if options.command.is_empty() {
        "the plain proxy form (the runtime started by hand)".to_string()
    } else {
        format!("`{}`", options.command.join(" "))
    };
    let description_text = format!(
        "Recorded by `rehearsal record` from {how} against {}: {} requests by {} ({}). The replies are the upstream's as it gave them; each latency_ms is the wall time measured while recording (arrival to the answer's end), rounded to {} ms, not a virtual time. Each reply's check.recorded is the request as the runtime sent it; its volatile spans are blanked before comparing. Replay: rehearsal drive THIS_FILE --runtime {} -- {}",
        options.upstream,
        recording.exchanges.len(),
        if agents.len() == 1 { "1 agent".to_string() } else { format!("{} agents", agents.len()) },
        agents_named.join(", "),
        options.latency_round_ms.max(1),
        description.name,
        if options.command.is_empty() { "THE_RUNTIME'S_COMMAND".to_string() } else { shell_words(&options.command) },
    );
    let mut scenario = Map::new();
    // `check.recorded` is a field of format 2: a rehearsal that reads only format 1 then
    // names the version, not the unknown field.
    scenario.insert("format".into(), json!(2));
    scenario.insert("name".into(), json!(options.name));
    scenario.insert("description".into(), json!(description_text));
    scenario.insert("rules".into(), json!({"preset": description.preset}));
    scenario.insert("session".into(), json!({"id": options.session}));
    if !tools.is_empty() {
        let declared: Vec<Value> = tools.iter().map(|t| json!({"name": t})).collect();
        scenario.insert("tools".into(), Value::Array(declared));
    }
    // Limits past the defaults, when the recording needs them (within the ceilings: what
    // `representable` left is within them).
    let defaults = crate::scenario::Limits::default();
    let mut limits = Map::new();
    let text_chars = longest.max(first_texts);
    if text_chars > defaults.max_text_chars {
        limits.insert("max_text_chars".into(), json!(text_chars));
    }
    if most_calls > defaults.max_calls_per_reply {
        limits.insert("max_calls_per_reply".into(), json!(most_calls));
    }
    if !limits.is_empty() {
        scenario.insert("limits".into(), Value::Object(limits));
    }
    scenario.insert("lanes".into(), Value::Array(lanes));
    scenario.insert("turns".into(), Value::Array(written_turns));
    Value::Object(scenario)
}

/// A command line as a shell reads it back: arguments with spaces or quotes single-quoted.
fn shell_words(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            if !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:{}@%+,".contains(c)) {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A request as `check.recorded` holds it. Its `volatile` list names only the patterns that
/// match in this request (a pattern matching nothing recorded can blank only the replay's
/// side, which then cannot compare equal anyway), so each check stays short. A secret in a
/// request is written as `[redacted]`: then the secret patterns that matched and the blank
/// itself are volatile too, so the replay's own key compares equal.
fn recorded_request(
    converted: &crate::wire::api::Converted,
    volatile: &[(String, regex::Regex)],
    secrets: &[(String, regex::Regex)],
    literals: &[String],
) -> Value {
    let mut texts: Vec<String> = vec![converted.system.clone()];
    for m in converted.messages.iter() {
        texts.push(m.content.clone());
        texts.extend(m.tool_calls.iter().map(|c| c.args.to_string()));
    }
    let matching = |list: &[(String, regex::Regex)]| -> Vec<String> {
        list.iter().filter(|(_, re)| texts.iter().any(|t| re.is_match(t))).map(|(p, _)| p.clone()).collect()
    };
    let mut volatile = matching(volatile);
    let secret = matching(secrets);
    let literal = literals.iter().any(|l| l.len() >= 4 && texts.iter().any(|t| t.contains(l.as_str())));
    if !secret.is_empty() || literal {
        volatile.extend(secret);
        volatile.push(regex::escape(REDACTED));
    }
    let messages: Vec<Value> = converted
        .messages
        .iter()
        .map(|m| {
            let mut out = Map::new();
            let role = match m.role {
                Role::User => "user",
                Role::Assistant => "assistant",
                Role::Tool => "tool",
            };
            out.insert("role".into(), json!(role));
            if !m.content.is_empty() {
                out.insert("content".into(), json!(m.content));
            }
            if !m.tool_calls.is_empty() {
                let calls: Vec<Value> = m
                    .tool_calls
                    .iter()
                    .map(|c| {
                        let mut call = Map::new();
                        call.insert("tool".into(), json!(c.name));
                        if !c.args.as_object().is_some_and(|o| o.is_empty()) {
                            call.insert("args".into(), (*c.args).clone());
                        }
                        Value::Object(call)
                    })
                    .collect();
                out.insert("calls".into(), Value::Array(calls));
            }
            Value::Object(out)
        })
        .collect();
    let mut out = Map::new();
    if !volatile.is_empty() {
        out.insert("volatile".into(), json!(volatile));
    }
    if !converted.system.is_empty() {
        out.insert("system".into(), json!(converted.system));
    }
    out.insert("messages".into(), Value::Array(messages));
    Value::Object(out)
}

/// The plain form's turns: each new user message the root's requests end with, in order.
fn root_turns(recording: &Recording, attributions: &[Option<Attribution>]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut last: Option<String> = None;
    for (n, a) in attributions.iter().enumerate() {
        let Some(Attribution::Agent(a)) = a else { continue };
        if a.alias.as_str() != "main" {
            continue;
        }
        let user = recording.exchanges[n].converted.messages.iter().rev().find(|m| m.role == Role::User);
        if let Some(user) = user
            && last.as_deref() != Some(user.content.as_str())
            && recording.exchanges[n].converted.messages.last().is_some_and(|m| m.role == Role::User)
        {
            last = Some(user.content.clone());
            out.push(json!({"user": user.content}));
        }
    }
    if out.is_empty() {
        out.push(json!({"user": ""}));
    }
    out
}

/// `value` with every secret blanked: the string values of credential keys, every literal
/// `secret` (auth header values seen), and every match of `patterns`. Applied to every string
/// of the file, keys' values and texts alike, so no field is missed.
#[doc(hidden)]
pub fn redacted(value: Value, secrets: &[String], patterns: &[regex::Regex]) -> Value {
    redacted_in(value, secrets, patterns, false)
}

/// Fields whose values are the file's own structure (a role, a preset, an alias, the
/// `volatile` patterns): never blanked, so that a key that happens to be `user` or `roku`
/// cannot unmake the file (it is blanked everywhere else).
const STRUCTURAL: [&str; 5] = ["role", "preset", "agent", "format", "volatile"];

/// [`redacted`] in a context: `free` is text written by the runtime or the model (inside a
/// call's `args`), where object keys are the model's words too and are blanked as well.
fn redacted_in(value: Value, secrets: &[String], patterns: &[regex::Regex], free: bool) -> Value {
    fn text(s: &str, secrets: &[String], patterns: &[regex::Regex]) -> String {
        let mut s = s.to_string();
        for secret in secrets.iter().filter(|s| s.len() >= 4) {
            s = s.replace(secret.as_str(), REDACTED);
            // A text cut short (a stream that broke) may end in the start of a secret: that
            // start is blanked too, from 4 characters on.
            let cut = secret
                .char_indices()
                .map(|(i, _)| i)
                .skip(4)
                .filter(|&end| end < secret.len() && s.ends_with(&secret[..end]))
                .max();
            if let Some(end) = cut {
                s.truncate(s.len() - end);
                s.push_str(REDACTED);
            }
        }
        for re in patterns {
            s = re.replace_all(&s, REDACTED).into_owned();
        }
        s
    }
    match value {
        Value::String(s) => Value::String(text(&s, secrets, patterns)),
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|v| redacted_in(v, secrets, patterns, free)).collect())
        }
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| {
                    let v = if v.is_string() && SECRET_KEYS.iter().any(|s| s.eq_ignore_ascii_case(&k)) {
                        Value::String(REDACTED.into())
                    } else if !free && STRUCTURAL.contains(&k.as_str()) {
                        v
                    } else {
                        redacted_in(v, secrets, patterns, free || k == "args")
                    };
                    let k = if free { text(&k, secrets, patterns) } else { k };
                    (k, v)
                })
                .collect(),
        ),
        other => other,
    }
}

/// `recording` as a scenario can hold it, with a note for each thing it could not: a call
/// without a name is left out (no scenario can script one), arguments that are not a JSON
/// object become `{}`, and a reply past the ceilings every file is held to
/// ([`crate::scenario::CEILINGS`]) is cut to them. The runtime got what the upstream sent; the
/// notes say where the file differs.
fn representable(recording: &Recording, notes: &mut Vec<String>) -> Recording {
    let ceilings = crate::scenario::CEILINGS;
    let mut out = recording.clone();
    for (n, e) in out.exchanges.iter_mut().enumerate() {
        if let Outcome::Error { status, .. } = &e.outcome
            && !(400..=599).contains(status)
        {
            notes.push(format!(
                "exchange {n}: the upstream answered status {status}, which a scenario's error_status cannot hold (400 to 599): written as {}",
                (*status).clamp(400, 599)
            ));
        }
        let (text, calls) = match &mut e.outcome {
            Outcome::Reply { text, calls } | Outcome::Dropped { text, calls, .. } => (text, calls),
            _ => continue,
        };
        let before = calls.len();
        calls.retain(|(_, name, _)| !name.trim().is_empty());
        if calls.len() < before {
            notes.push(format!(
                "exchange {n}: {} of the upstream's calls had no function name, which no scenario can script: left out of the file",
                before - calls.len()
            ));
        }
        for (_, name, args) in calls.iter_mut() {
            if !matches!(serde_json::from_str::<Value>(args), Ok(Value::Object(_))) {
                notes.push(format!(
                    "exchange {n}: the arguments of call `{}` are not a JSON object ({}); written as {{}}",
                    crate::wire::excerpt(name),
                    crate::trace::quoted(&crate::wire::excerpt(args))
                ));
                *args = "{}".to_string();
            }
        }
        if calls.len() > ceilings.max_calls_per_reply {
            notes.push(format!(
                "exchange {n}: the reply holds {} calls, more than any file may hold ({}): the first {} are kept",
                calls.len(),
                ceilings.max_calls_per_reply,
                ceilings.max_calls_per_reply
            ));
            calls.truncate(ceilings.max_calls_per_reply);
        }
        if let Some((cut, _)) = text.char_indices().nth(ceilings.max_text_chars) {
            notes.push(format!(
                "exchange {n}: the reply's text has {} characters, more than any file may hold ({}): it is cut there",
                text.chars().count(),
                ceilings.max_text_chars
            ));
            text.truncate(cut);
        }
    }
    out
}

/// `recording` with its secrets blanked as the file holds them ([`redacted`] on every text,
/// argument and schema of every request and answer), for the writer's own check.
fn redacted_recording(recording: &Recording, secrets: &[String], patterns: &[regex::Regex]) -> Recording {
    let text = |s: &str| match redacted(Value::String(s.to_string()), secrets, patterns) {
        Value::String(s) => s,
        _ => unreachable!("a string is redacted to a string"),
    };
    // Call arguments are the model's own text: their keys are blanked too, as the file's are.
    let value = |v: &Value| redacted_in(v.clone(), secrets, patterns, true);
    // Arguments are kept as the JSON text the model wrote: blanked as the file writes them.
    let args_text = |a: &str| match serde_json::from_str::<Value>(a) {
        Ok(v) => value(&v).to_string(),
        Err(_) => text(a),
    };
    let calls = |calls: &[(String, String, String)]| -> Vec<(String, String, String)> {
        calls.iter().map(|(id, name, args)| (text(id), text(name), args_text(args))).collect()
    };
    let mut out = recording.clone();
    // The proxy's findings quote requests (a malformed role, an unserved path): they reach
    // the printed verdict, so they are blanked as the file is.
    for finding in &mut out.findings {
        finding.message = text(&finding.message);
    }
    for e in &mut out.exchanges {
        let c = &mut e.converted;
        c.system = text(&c.system);
        c.messages = c
            .messages
            .iter()
            .map(|m| {
                let mut m = m.clone();
                m.content = text(&m.content);
                for call in &mut m.tool_calls {
                    call.name = text(&call.name);
                    call.args = Arc::new(value(&call.args));
                }
                m
            })
            .collect();
        for tool in &mut c.tools {
            tool.description = text(&tool.description);
            tool.name = text(&tool.name);
            tool.parameters = Arc::new(redacted(tool.parameters.as_ref().clone(), secrets, patterns));
        }
        e.outcome = match &e.outcome {
            Outcome::Reply { text: t, calls: c } => Outcome::Reply { text: text(t), calls: calls(c) },
            Outcome::Dropped { chunks, text: t, calls: c } => {
                Outcome::Dropped { chunks: *chunks, text: text(t), calls: calls(c) }
            }
            Outcome::Error { status, kind, message } => {
                Outcome::Error { status: *status, kind: kind.as_deref().map(text), message: text(message) }
            }
            other => other.clone(),
        };
    }
    out
}

/// The file's text in the style of scenarios/: the top-level fields one per line, each lane's
/// replies one per line.
fn layout(value: &Value) -> String {
    let compact = |v: &Value| serde_json::to_string(v).expect("JSON values print");
    let Value::Object(map) = value else { return compact(value) };
    let mut out = String::from("{\n");
    let last = map.len().saturating_sub(1);
    for (i, (key, v)) in map.iter().enumerate() {
        out.push_str(&format!("  {}: ", compact(&json!(key))));
        match (key.as_str(), v) {
            ("lanes", Value::Array(lanes)) => {
                out.push_str("[\n");
                for (j, lane) in lanes.iter().enumerate() {
                    let Value::Object(lane) = lane else { continue };
                    let head: Vec<String> = lane
                        .iter()
                        .filter(|(k, _)| *k != "replies")
                        .map(|(k, v)| format!("{}: {}", compact(&json!(k)), compact(v)))
                        .collect();
                    out.push_str(&format!("    {{{}, \"replies\": [\n", head.join(", ")));
                    let replies = lane.get("replies").and_then(Value::as_array).cloned().unwrap_or_default();
                    for (r, reply) in replies.iter().enumerate() {
                        let comma = if r + 1 < replies.len() { "," } else { "" };
                        out.push_str(&format!("      {}{comma}\n", compact(reply)));
                    }
                    out.push_str(&format!("    ]}}{}\n", if j + 1 < lanes.len() { "," } else { "" }));
                }
                out.push_str("  ]");
            }
            ("turns", Value::Array(turns)) => {
                out.push_str("[\n");
                for (j, turn) in turns.iter().enumerate() {
                    out.push_str(&format!("    {}{}\n", compact(turn), if j + 1 < turns.len() { "," } else { "" }));
                }
                out.push_str("  ]");
            }
            _ => out.push_str(&compact(v)),
        }
        out.push_str(if i < last { ",\n" } else { "\n" });
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_cut_in_the_middle_of_a_secret_loses_that_start_too() {
        // The third independent attack's D3: a stream that broke mid-key left its first half.
        let secrets = ["Qw8rTy6uIo4pAs".to_string()];
        let blank = |t: &str| redacted(Value::String(t.into()), &secrets, &[]);
        assert_eq!(blank("key is Qw8rTy6"), json!("key is [redacted]"));
        assert_eq!(blank("key is Qw8rTy6uIo4pAs, ok"), json!("key is [redacted], ok"));
        assert_eq!(blank("key is Qw8"), json!("key is Qw8"), "3 characters are not a start worth blanking");
    }

    #[test]
    fn a_bad_pattern_names_its_flag_and_itself() {
        let err = patterns(["ok".to_string(), "(unclosed".to_string()].into_iter(), "--volatile").unwrap_err();
        let RecordError::Pattern { flag, pattern, .. } = &err else { panic!("{err:?}") };
        assert_eq!((*flag, pattern.as_str()), ("--volatile", "(unclosed"));
        assert!(err.to_string().starts_with("--volatile \"(unclosed\": regex parse error"), "{err}");
        assert!(std::error::Error::source(&err).is_some());
    }

    #[test]
    fn nothing_recorded_quotes_the_runtimes_last_words() {
        let err = RecordError::NothingRecorded { stderr_tail: vec!["boom".into(), "bye".into()] };
        assert_eq!(
            err.to_string(),
            "no model request (a chat completion, a message or a response) came through the proxy: nothing to record (is the runtime's base URL the proxy's?)\n  stderr: boom\n  stderr: bye"
        );
    }

    #[test]
    fn a_writer_that_disagrees_with_its_recording_is_rehearsal_s_bug_not_the_runtime_s() {
        let e = RecordError::Inconsistent {
            file: PathBuf::from("out.json"),
            differences: vec![
                "exchange 0 (main): the scenario answers text \"a\", the recording has text \"b\"".into(),
            ],
        };
        let said = e.to_string();
        assert!(said.starts_with("internal error: out.json does not play back the run it was written from"), "{said}");
        assert!(said.contains("not of the runtime"), "{said}");
        assert!(said.ends_with("the recording has text \"b\""), "{said}");
    }

    #[test]
    fn the_self_check_reads_the_recording_blanked_as_the_file_is() {
        let request: crate::wire::api::ChatRequest =
            serde_json::from_str(r#"{"messages":[{"role":"user","content":"my key is hunter2hunter2"}]}"#).unwrap();
        let recording = Recording {
            exchanges: vec![proxy::RecordedExchange {
                api: proxy::Api::Chat,
                converted: request.convert().unwrap(),
                model: None,
                streamed: false,
                arrived: Duration::ZERO,
                ended: None,
                outcome: Outcome::Reply {
                    text: "echo hunter2hunter2".into(),
                    calls: vec![("c".into(), "f".into(), r#"{"password":"x","k":"hunter2hunter2"}"#.into())],
                },
            }],
            ..Recording::default()
        };
        let blanked = redacted_recording(&recording, &["hunter2hunter2".to_string()], &[]);
        let e = &blanked.exchanges[0];
        assert_eq!(e.converted.messages.iter().next().unwrap().content, "my key is [redacted]");
        assert_eq!(
            e.outcome,
            Outcome::Reply {
                text: "echo [redacted]".into(),
                calls: vec![("c".into(), "f".into(), r#"{"password":"[redacted]","k":"[redacted]"}"#.into())]
            }
        );
    }

    #[test]
    fn secrets_are_blanked_in_keys_texts_and_literals() {
        let patterns: Vec<regex::Regex> = DEFAULT_REDACT.iter().map(|p| regex::Regex::new(p).unwrap()).collect();
        let value = json!({
            "a": "my key is sk-abcdefghijkl1234 ok",
            "b": {"api_key": "whatever-it-is"},
            "c": ["token: plainsecret99 here", "Bearer abcdefgh.ijk"],
            "d": "{\"api_key\": \"zzzzzzzzzz\"}"
        });
        let out = redacted(value, &["plainsecret99".to_string()], &patterns).to_string();
        for secret in ["sk-abcdefghijkl1234", "whatever-it-is", "plainsecret99", "abcdefgh.ijk", "zzzzzzzzzz"] {
            assert!(!out.contains(secret), "{secret} left in {out}");
        }
        assert_eq!(out.matches(REDACTED).count(), 5, "{out}");
    }

    #[test]
    fn anthropic_keys_are_blanked_by_the_default_patterns() {
        let patterns: Vec<regex::Regex> = DEFAULT_REDACT.iter().map(|p| regex::Regex::new(p).unwrap()).collect();
        for key in ["sk-ant-api03-Ab_cD-123456789xyz", "sk-ant-oat01-Zz9_yY8-xX7wW6"] {
            let out = redacted(json!(format!("x-api-key was {key}.")), &[], &patterns);
            assert_eq!(out, json!("x-api-key was [redacted]."), "{key}");
        }
    }

    #[test]
    fn latencies_round_to_the_nearest_multiple() {
        assert_eq!(round(304, 10), 300);
        assert_eq!(round(305, 10), 310);
        assert_eq!(round(7, 1), 7);
        assert_eq!(round(4, 10), 0);
    }
}

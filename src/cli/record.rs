//! `rehearsal record --upstream URL --out FILE [-- CMD ARGS...]`: a real run through a proxy
//! to an upstream model, written as a scenario, then judged: which rules the real run broke.
//! With a command, it runs once per `--message` as under `drive`; without one (the plain
//! proxy form) the runtime is started by hand and the recording ends on Ctrl-C or the idle
//! limit.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::report::{Reporter, Style};
use super::style::Terminal;
use super::{ColorChoice, Exit, Format};
use crate::trace::printable;
use crate::wire::record::{RecordError, RecordOptions};
use crate::wire::runtime::RuntimeDescription;

/// The options of `rehearsal record`.
#[derive(clap::Args, Debug)]
pub(super) struct RecordArgs {
    /// The upstream model's base URL, as an OpenAI client takes it (http://HOST:PORT/v1; plain
    /// http only): /v1/chat/completions goes to URL/chat/completions, /v1/messages to
    /// URL/messages, /v1/responses to URL/responses.
    #[arg(long, value_name = "URL")]
    upstream: String,
    /// Where the scenario is written.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// The runtime: a built-in description (bub, py-runtime, roku, generic, pydantic-ai, openai-agents, smolagents, claude-code) or a description
    /// `.json` file (docs/runtimes.md): its dialect attributes the requests, its preset is the
    /// scenario's rules, its env reaches the command.
    #[arg(long, value_name = "NAME", default_value = "generic")]
    runtime: String,
    /// A user turn: the command runs once per message, with `{message}`. Repeat for more.
    #[arg(long, value_name = "TEXT")]
    message: Vec<String>,
    /// The scenario's name (default: the file's stem).
    #[arg(long)]
    name: Option<String>,
    /// The scenario's session id, and the command's `{session}`.
    #[arg(long, default_value = "recorded")]
    session: String,
    /// A secret's pattern (a regular expression), blanked as `[redacted]` wherever it appears,
    /// besides the defaults (sk-..., Bearer ..., api_key fields). Repeat for more.
    #[arg(long, value_name = "REGEX")]
    redact: Vec<String>,
    /// A volatile span's pattern (a regular expression) that request checks blank before
    /// comparing, besides the defaults (bub's `---Date: ...---`, temp folders). Repeat for more.
    #[arg(long, value_name = "REGEX")]
    volatile: Vec<String>,
    /// Send the upstream `Authorization: Bearer $VAR` (on /v1/messages: `x-api-key: $VAR`)
    /// instead of the runtime's auth headers.
    #[arg(long, value_name = "VAR")]
    upstream_key_env: Option<String>,
    /// How long to wait for an upstream answer before recording it as a `hang`.
    #[arg(long, value_name = "DURATION", default_value = "300s", value_parser = super::positive_duration)]
    upstream_timeout: humantime::Duration,
    /// How long the upstream may send nothing in the middle of an answer before it is recorded
    /// as a `hang` from there on.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = super::positive_duration)]
    upstream_idle: humantime::Duration,
    /// The most bytes of one upstream answer the recording keeps. The runtime still gets the
    /// whole answer as it streams; the recording keeps what came before the limit and a note says so.
    #[arg(long, value_name = "BYTES", default_value_t = 16 << 20, value_parser = clap::value_parser!(u64).range(1..))]
    max_reply_bytes: u64,
    /// The plain proxy form ends when no request arrived and none was open for this long.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = super::positive_duration)]
    idle_limit: humantime::Duration,
    /// The wall-clock limit of one turn's command; past it its process group is killed.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = super::positive_duration)]
    turn_limit: humantime::Duration,
    /// Latencies are rounded to a multiple of this many milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 10)]
    round_ms: u64,
    /// The proxy's port on 127.0.0.1; 0 takes a free one.
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Output format of the recording's verdict.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Print the recorded exchanges under the verdict (text format).
    #[arg(long)]
    trace: bool,
    /// When to colour the text report.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = ColorChoice::Auto)]
    color: ColorChoice,
    /// The runtime's command and its arguments, after `--` (drive's placeholders). None: the
    /// plain proxy form.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

/// `rehearsal record --help`'s closing part.
pub(super) const RECORD_AFTER_HELP: &str = "\
Requests to the proxy (POST /v1/chat/completions, POST /v1/messages with its query, POST
/v1/messages/count_tokens, POST /v1/responses, GET /v1/models) go to the upstream; its answers come back
unchanged, streamed as the runtime asked. At the end the scenario is written
(one lane per agent, the replies as given, latencies as measured wall times, a check.recorded
on every reply with the request as sent), with every auth header value and secret pattern
blanked; then it is read back and the recording is judged by the model-side oracles and the
turns' expectations. Replay it with `rehearsal drive FILE --runtime NAME -- CMD`.

Exit codes:
  0    recorded; the real run broke no rule
  1    recorded; the real run broke a rule (the verdict names it)
  2    bad input or usage: an https or malformed upstream, a bad pattern, no --message with a
       command, an unknown runtime
  3    internal error: the file written is not a valid scenario, or does not play back the
       run it was written from (rehearsal's own bug, not the runtime's)
  4    the system under test could not be run: the command was not found, or no request came";

pub(super) fn record(args: &RecordArgs, out: &mut dyn Write, err: &mut dyn Write, terminal: Terminal) -> Exit {
    let style = Style::plain(args.format, false, args.color, terminal);
    let mut reporter = Reporter::new(style);
    let description = match RuntimeDescription::load(&args.runtime) {
        Ok(d) => d,
        Err(e) => {
            reporter.error(err, &format!("--runtime: {e}"));
            return Exit::BadInput;
        }
    };
    if !args.command.is_empty() && args.message.is_empty() {
        reporter.error(err, "a command records one turn per --message: give at least one");
        return Exit::BadInput;
    }
    let upstream_key = match &args.upstream_key_env {
        Some(var) => match std::env::var(var) {
            Ok(key) if !key.is_empty() => Some(key),
            _ => {
                reporter.error(err, &format!("--upstream-key-env {var}: the variable is not set"));
                return Exit::BadInput;
            }
        },
        None => None,
    };
    let interrupt = Arc::new(AtomicBool::new(false));
    {
        let flag = interrupt.clone();
        let _ = ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst));
    }
    let name = args.name.clone().unwrap_or_else(|| {
        args.out.file_stem().map_or_else(|| "recorded".to_string(), |s| s.to_string_lossy().into_owned())
    });
    let options = RecordOptions {
        upstream: args.upstream.clone(),
        command: args.command.clone(),
        messages: args.message.clone(),
        name,
        session: args.session.clone(),
        redact: args.redact.clone(),
        volatile: args.volatile.clone(),
        latency_round_ms: args.round_ms,
        upstream_key,
        upstream_timeout: args.upstream_timeout.into(),
        upstream_idle: args.upstream_idle.into(),
        max_reply_bytes: usize::try_from(args.max_reply_bytes).unwrap_or(usize::MAX),
        idle_limit: args.idle_limit.into(),
        turn_limit: args.turn_limit.into(),
        port: args.port,
        interrupt: Some(interrupt.clone()),
        temp_root: None,
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build() {
        Ok(r) => r,
        Err(e) => {
            reporter.error(err, &format!("cannot start a runtime: {e}"));
            return Exit::Internal;
        }
    };
    let plain = args.command.is_empty();
    let recorded = runtime.block_on(crate::wire::record::record(&description, &options, &args.out, |base| {
        let _ = writeln!(err, "recording through {base} to {}", printable(&args.upstream));
        if plain {
            for line in super::serve::env_lines(base, &args.runtime) {
                let _ = writeln!(err, "export {line}");
            }
            let _ = writeln!(err, "(Ctrl-C or {} without a request ends the recording)", args.idle_limit);
        }
        let _ = err.flush();
    }));
    let recorded = match recorded {
        Ok(r) => r,
        Err(e) => {
            reporter.error(err, &e.to_string());
            return match e {
                RecordError::Pattern { .. } | RecordError::Proxy(_) => Exit::BadInput,
                RecordError::Run(e) if e.is_not_run() => Exit::NotRun,
                RecordError::NothingRecorded { .. } => Exit::NotRun,
                RecordError::Run(_)
                | RecordError::Write { .. }
                | RecordError::Written(_)
                | RecordError::Inconsistent { .. } => Exit::Internal,
            };
        }
    };
    let shown = printable(&args.out.to_string_lossy()).into_owned();
    reporter.note(
        err,
        &format!(
            "wrote {shown}: {} requests, {} lanes, {} turns, {} ms wall time",
            recorded.recording.exchanges.len(),
            recorded.scenario.lanes.len(),
            recorded.scenario.turns.len(),
            recorded.recording.elapsed.as_millis()
        ),
    );
    for note in &recorded.notes {
        reporter.note(err, &printable(note));
    }
    if !recorded.verdict.passed() {
        reporter.note(err, "the real run broke the rules below; the scenario replays it as it happened");
    }
    reporter.scenario(out, &args.out, &recorded.verdict, recorded.recording.elapsed);
    if args.trace && args.format == Format::Text {
        for line in crate::wire::trace_lines(&recorded.wire) {
            let _ = writeln!(out, "    {}", printable(&line));
        }
    }
    reporter.finish(out, err, None)
}

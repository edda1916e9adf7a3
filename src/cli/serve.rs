//! `rehearsal serve SCENARIO`: the scenario's script played as an OpenAI-compatible model on
//! 127.0.0.1 until the script ends or the idle limit passes; then the run is judged by the
//! model-side oracles and reported as `rehearsal run` reports (text, JSON lines, JUnit).

use std::io::Write;
use std::path::PathBuf;

use super::report::{Reporter, Style};
use super::style::Terminal;
use super::{ColorChoice, Exit, Format};
use crate::dialect::Dialect;
use crate::wire::clock::{ClockEnd, ClockEndpoint, ClockOptions, ClockReport};
use crate::wire::runtime::RuntimeDescription;
use crate::wire::{self, End, ServeOptions, Server, WireRun};

/// The options of `rehearsal serve`.
#[derive(clap::Args, Debug)]
pub(super) struct ServeArgs {
    /// The scenario file.
    scenario: PathBuf,
    /// How the runtime spells sub-agents: a built-in dialect (rehearsal, roku, bub, bub-0.5.1,
    /// generic) or a dialect `.json` file; else a runtime description as `drive` takes it
    /// (py-runtime, or a description `.json` file), whose limits are then judged in place of
    /// the file's `rules` and whose env is printed to export.
    #[arg(long, value_name = "NAME", default_value = "generic")]
    runtime: String,
    /// The port on 127.0.0.1; 0 takes a free one.
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Real seconds per scripted second of latency (0 answers at once). Wire times are wall
    /// times.
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    time_scale: f64,
    /// End the run when no request arrived and none was answered for this long, counted from
    /// the first request.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = super::positive_duration)]
    idle_limit: humantime::Duration,
    /// How long to wait for the first request (the runtime's start-up: a Python SDK's imports
    /// take seconds); past it the run ends with exit 4.
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = super::positive_duration)]
    startup_limit: humantime::Duration,
    /// After the script has ended, keep listening this long: a request that comes then is
    /// answered with a 400 API error object (`script_ended`) and fails the verdict, instead of
    /// finding no server. Ctrl-C ends the wait.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = super::duration)]
    after_script: humantime::Duration,
    /// Once listening, write FILE (atomically) with one JSON object for a program that starts
    /// serve: {"base_url": ..., "env": {NAME: VALUE, ...}, "pid": ...}, the env being the lines
    /// printed to export.
    #[arg(long, value_name = "FILE")]
    ready_file: Option<PathBuf>,
    /// Requests whose last message contains TEXT are side requests (a title or summary call):
    /// answered with an empty text, put down to no agent. Repeat for more.
    #[arg(long, value_name = "TEXT")]
    side: Vec<String>,
    /// Output format of the verdict.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Print the exchanges under the verdict (text format).
    #[arg(long)]
    trace: bool,
    /// Name every oracle the verdict was judged by (without it, their count).
    #[arg(long)]
    verbose: bool,
    /// When to colour the text report.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = ColorChoice::Auto)]
    color: ColorChoice,
    /// Draw the run as seen from the model's side to FILE (SVG, or an HTML page for .html),
    /// as `drive --timeline` does.
    #[arg(long, value_name = "FILE")]
    timeline: Option<PathBuf>,
    /// Hold every scripted reply until no request has arrived for QUIET, then release them one
    /// at a time in alias order, waiting for quiet again after each: the same answer order in
    /// every run, on real time (docs/wire.md#--barrier). Costs QUIET per reply. Not with --clock.
    #[arg(long, value_name = "QUIET", num_args = 0..=1, default_missing_value = "200ms",
          value_parser = super::positive_duration, conflicts_with = "clock")]
    barrier: Option<humantime::Duration>,
    /// Serve on the harness's virtual time (docs/clock-protocol.md): also prints the
    /// REHEARSAL_CLOCK, PYTHONPATH and PYTHONHASHSEED lines the runtime must be started with.
    #[arg(long)]
    clock: bool,
    /// The clock shim's folder (default: $REHEARSAL_CLOCK_SHIM, else the shims/python of the
    /// rehearsal checkout this binary was built from).
    #[arg(long, value_name = "DIR", requires = "clock")]
    clock_shim: Option<PathBuf>,
}

/// `rehearsal serve --help`'s closing part.
pub(super) const SERVE_AFTER_HELP: &str = "\
It prints the base URL and the environment lines to export (OPENAI_BASE_URL, OPENAI_API_KEY,
ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY, and the runtime's own, such as BUB_API_BASE) on stderr,
then serves POST /v1/chat/completions, POST /v1/responses and the Anthropic POST /v1/messages
(streamed and not), POST /v1/messages/count_tokens and GET /v1/models. Wire times are wall times: a scripted latency waits
latency_ms x --time-scale real milliseconds. With --clock they are virtual: start the runtime
with the REHEARSAL_CLOCK, PYTHONPATH and PYTHONHASHSEED lines printed too (one runtime process
at a time follows the clock; docs/clock-protocol.md).

Exit codes:
  0    the run passed
  1    a rule was broken (a model-side oracle, a request check, the script left unused, a
       malformed, oversized, unattributed or unserved request)
  2    bad input or usage: an unreadable or invalid scenario, an unknown runtime, a port
       that cannot be bound
  3    internal error
  4    the system under test could not be run: no request arrived within the start-up limit";

pub(super) fn serve(args: &ServeArgs, out: &mut dyn Write, err: &mut dyn Write, terminal: Terminal) -> Exit {
    let mut style = Style::plain(args.format, false, args.color, terminal);
    style.verbose = args.verbose;
    let mut reporter = Reporter::new(style);
    // A dialect, or else a runtime description (as `drive --runtime` takes): then its dialect
    // reads the requests, its limits are judged in place of the file's `rules`, and its env
    // is among the lines to export.
    let (dialect, described) = match Dialect::load(&args.runtime) {
        Ok(dialect) => (dialect, None),
        Err(dialect_error) => match RuntimeDescription::load(&args.runtime) {
            Ok(description) => (description.dialect(), Some(description)),
            Err(_) => {
                reporter.error(
                    err,
                    &format!(
                        "--runtime: {dialect_error}; nor a runtime description (built-in: {})",
                        crate::wire::runtime::BUILTIN.join(", ")
                    ),
                );
                return Exit::BadInput;
            }
        },
    };
    let scenario = match crate::load::outside_for(&args.scenario, &dialect.vocabulary()) {
        Ok(loaded) => loaded.into_parts().0,
        Err(e) => {
            reporter.bad_input(out, err, &args.scenario, &e);
            return reporter.finish(out, err, None);
        }
    };
    // No output may be written over an input (as for `run --timeline`).
    if let Some(timeline) = &args.timeline
        && crate::golden::same_file(timeline, &args.scenario)
    {
        let shown = crate::trace::printable(&timeline.to_string_lossy()).into_owned();
        reporter.error(err, &format!("--timeline {shown} is the input file: not overwritten (name another file)"));
        return Exit::BadInput;
    }
    let judged = match &described {
        Some(description) => {
            let (judged, notes) = description.judged_as(&scenario);
            for note in notes {
                reporter.note(err, &note);
            }
            judged
        }
        None => scenario.clone(),
    };
    let shim = match args.clock.then(|| crate::wire::drive::find_clock_shim(args.clock_shim.as_deref())) {
        Some(Ok(shim)) => Some(shim),
        Some(Err(why)) => {
            reporter.error(err, &format!("--clock: {why}"));
            return Exit::BadInput;
        }
        None => None,
    };
    let options = ServeOptions {
        port: args.port,
        time_scale: args.time_scale,
        idle_limit: args.idle_limit.into(),
        startup_limit: args.startup_limit.into(),
        side: args.side.clone(),
        barrier: args.barrier.map(Into::into),
        agent_header: described.as_ref().map(|d| d.agent_header.clone()).unwrap_or_default(),
        ..ServeOptions::default()
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            reporter.error(err, &format!("cannot start the server's runtime: {e}"));
            return Exit::Internal;
        }
    };
    let run = runtime.block_on(async {
        let endpoint = match &shim {
            Some(_) => Some(
                ClockEndpoint::bind(ClockOptions::default())
                    .await
                    .map_err(|source| wire::ServeError::ClockEndpoint { source })?,
            ),
            None => None,
        };
        let options = ServeOptions {
            clock: endpoint.as_ref().map(ClockEndpoint::clock),
            created_s: endpoint.as_ref().map(|_| crate::wire::clock::endpoint::DEFAULT_EPOCH_NS / 1_000_000_000),
            ..options
        };
        let server = Server::start(&scenario, dialect, options).await?;
        let base = server.base_url();
        let _ = writeln!(err, "serving {} on {base}", crate::trace::printable(&scenario.name));
        let mut env: Vec<(String, String)> = env_lines(&base, &args.runtime)
            .into_iter()
            .filter_map(|line| line.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
            .collect();
        if let Some(description) = &described {
            // Its env, less what names drive's temp folders (a runtime started by hand has its own).
            let model = scenario.session.model.clone().unwrap_or_else(|| "rehearsal".to_string());
            for (k, template) in &description.env {
                if template.contains("{home}") || template.contains("{workdir}") {
                    continue;
                }
                let origin = base.strip_suffix("/v1").unwrap_or(&base);
                let v = template.replace("{base_url}", &base).replace("{origin}", origin).replace("{model}", &model);
                env.retain(|(key, _)| key != k);
                env.push((k.clone(), v));
            }
        }
        for (k, v) in &env {
            let _ = writeln!(err, "export {k}={v}");
        }
        if let (Some(endpoint), Some(shim)) = (&endpoint, &shim) {
            endpoint.set_http(vec![server.addr().to_string()]);
            let _ = writeln!(err, "export REHEARSAL_CLOCK={}", endpoint.env_value());
            let _ = writeln!(err, "export PYTHONPATH={}${{PYTHONPATH:+:$PYTHONPATH}}", shim.display());
            let _ = writeln!(err, "export PYTHONHASHSEED=0");
            let pythonpath = match std::env::var("PYTHONPATH") {
                Ok(old) if !old.is_empty() => format!("{}:{old}", shim.display()),
                _ => shim.display().to_string(),
            };
            env.push(("REHEARSAL_CLOCK".into(), endpoint.env_value()));
            env.push(("PYTHONPATH".into(), pythonpath));
            env.push(("PYTHONHASHSEED".into(), "0".into()));
        }
        let _ = err.flush();
        if let Some(path) = &args.ready_file {
            write_ready(path, &base, &env)
                .map_err(|source| wire::ServeError::ReadyFile { path: path.clone(), source })?;
        }
        let clock = endpoint.as_ref().map(ClockEndpoint::clock);
        // A clock that ends by itself no longer moves the runtime: the run is over.
        let clock_ended = || async {
            match &clock {
                Some(clock) => clock.ended().await,
                None => std::future::pending().await,
            }
        };
        let end = tokio::select! {
            end = server.done() => end,
            _ = tokio::signal::ctrl_c() => End::Caller,
            () = clock_ended() => End::Caller,
        };
        if matches!(end, End::Script | End::Stopped) && !args.after_script.is_zero() {
            // The runtime may still ask: it is told the script is over (or stopped), and the
            // verdict says so, rather than finding no server.
            if end == End::Script {
                server.script_over();
            }
            tokio::select! {
                _ = tokio::time::sleep(args.after_script.into()) => {}
                _ = tokio::signal::ctrl_c() => {}
                () = clock_ended() => {}
            }
        }
        let run = server.finish(end).await;
        let report = match endpoint {
            Some(endpoint) => Some(endpoint.finish().await),
            None => None,
        };
        Ok::<(WireRun, Option<ClockReport>), wire::ServeError>((run, report))
    });
    let (run, clock) = match run {
        Ok(run) => run,
        Err(e) => {
            reporter.error(err, &e.to_string());
            return Exit::BadInput;
        }
    };
    // The clock's own end, when it ended by itself: the run is over for that reason, not
    // because of the caller, and the report says why.
    let clock_stopped = clock.as_ref().map(|report| &report.end).filter(|end| match end {
        ClockEnd::Finished { .. } => false,
        ClockEnd::Stuck { .. } => run.end != End::Script,
        _ => true,
    });
    let ended = match (run.end, clock_stopped) {
        (End::Script, _) => "the script ended",
        (End::Stopped, _) => "the script stopped the run",
        (End::Idle, _) => "the idle limit passed",
        (End::Caller, Some(_)) => "the clock stopped following the runtime",
        (End::Caller, None) => "interrupted",
    };
    reporter.note(err, &format!("{ended} after {} requests, {} ms wall time", run.requests, run.elapsed.as_millis()));
    for place in wire::not_applied(&scenario) {
        reporter.note(err, &format!("not judged over the wire: {place}"));
    }
    for d in &run.disconnects {
        reporter.note(
            err,
            &format!(
                "request #{} ({} exchange {}): the client gave up after {} ms{}",
                d.request,
                if d.alias.is_empty() { "?" } else { &d.alias },
                d.exchange,
                d.held_ms,
                if d.hang { " (a scripted hang)" } else { "" }
            ),
        );
    }
    if run.requests == 0 {
        let why = match clock_stopped {
            Some(end) => {
                format!("no request arrived: the clock stopped following the runtime before its first request: {end}")
            }
            None if run.end == End::Idle => format!(
                "no request arrived within the start-up limit ({}): the system under test never called the server",
                args.startup_limit
            ),
            None => "no request arrived: the system under test never called the server".to_string(),
        };
        reporter.not_run(out, err, &why);
        // The machine formats end with their summary; the text report's error says it all.
        if reporter.format() == Format::Text {
            return Exit::NotRun;
        }
        return reporter.finish(out, err, None);
    }
    let request_limits = described.as_ref().map(|d| d.limits.request_limits.clone()).unwrap_or_default();
    let mut judgement = wire::judgement(&judged, &run, &request_limits);
    if let Some(report) = &clock {
        reporter.note(err, &format!("the clock ended at {} virtual", crate::wire::clock::seconds(report.now_ns)));
        judgement = judgement.elapsed(std::time::Duration::from_nanos(report.now_ns));
        match &report.end {
            ClockEnd::Finished { .. } => {}
            ClockEnd::Stuck { .. } if run.end == End::Script => {}
            end => {
                judgement = judgement.first(vec![crate::judge::Failure::new(
                    crate::judge::FailureKind::Stopped,
                    format!("the clock stopped following the runtime: {end}"),
                    Vec::new(),
                )])
            }
        }
    }
    let verdict = judgement.verdict();
    reporter.scenario(out, &args.scenario, &verdict, run.elapsed);
    if let Some(path) = &args.timeline
        && let Err(e) = crate::timeline::write_model_side(path, &scenario.name, &run.side)
    {
        // The run was judged (its verdict is above); the output path failed.
        let shown = crate::trace::printable(&path.to_string_lossy()).into_owned();
        reporter.error(err, &format!("{shown}: cannot write the timeline: {e}"));
        reporter.usage_errors += 1;
    }
    if args.trace && args.format == Format::Text {
        for line in wire::trace_lines(&run) {
            let _ = writeln!(out, "    {}", crate::trace::printable(&line));
        }
        for line in clock.iter().flat_map(|report| &report.transcript) {
            let _ = writeln!(out, "    clock {}", crate::trace::printable(line));
        }
    }
    reporter.finish(out, err, None)
}

/// Writes the ready file: written beside its place, then renamed, so a reader never sees half.
fn write_ready(path: &std::path::Path, base: &str, env: &[(String, String)]) -> std::io::Result<()> {
    let env: serde_json::Map<String, serde_json::Value> =
        env.iter().map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone()))).collect();
    let ready = serde_json::json!({"base_url": base, "env": env, "pid": std::process::id()});
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = std::path::PathBuf::from(partial);
    // Renamed over only a file (or nothing): never over a device, a FIFO or a link.
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.is_file() => {
            return Err(std::io::Error::other("it exists and is not a regular file"));
        }
        _ => {}
    }
    std::fs::write(&partial, format!("{ready}\n"))?;
    std::fs::rename(&partial, path)
}

/// The environment lines a runtime takes: the OpenAI SDK's, the Anthropic SDK's (its base URL
/// without `/v1`: it adds `/v1/messages` itself), and the runtime's own.
pub(super) fn env_lines(base: &str, runtime: &str) -> Vec<String> {
    let mut lines = vec![
        format!("OPENAI_BASE_URL={base}"),
        "OPENAI_API_KEY=rehearsal".to_string(),
        format!("ANTHROPIC_BASE_URL={}", base.strip_suffix("/v1").unwrap_or(base)),
        "ANTHROPIC_API_KEY=rehearsal".to_string(),
    ];
    if runtime.starts_with("bub") {
        lines.push(format!("BUB_API_BASE={base}"));
        lines.push("BUB_API_KEY=rehearsal".to_string());
        lines.push("BUB_MODEL=openai:rehearsal".to_string());
    }
    if runtime == "roku" {
        lines.push(format!("ROKU_OPENAI_BASE_URL={base}/chat/completions"));
    }
    lines
}

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
use crate::wire::{self, End, ServeOptions, Server, WireRun};

/// The options of `rehearsal serve`.
#[derive(clap::Args, Debug)]
pub(super) struct ServeArgs {
    /// The scenario file.
    scenario: PathBuf,
    /// How the runtime spells sub-agents: a built-in dialect (rehearsal, roku, bub, bub-0.5.1,
    /// generic) or a dialect `.json` file.
    #[arg(long, value_name = "NAME", default_value = "generic")]
    runtime: String,
    /// The port on 127.0.0.1; 0 takes a free one.
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Real seconds per scripted second of latency (0 answers at once). Wire times are wall
    /// times.
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    time_scale: f64,
    /// End the run when no request arrived and none was answered for this long.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = super::positive_duration)]
    idle_limit: humantime::Duration,
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
and the runtime's own, such as BUB_API_BASE) on stderr, then serves POST /v1/chat/completions
(streamed and not) and GET /v1/models. Wire times are wall times: a scripted latency waits
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
  4    the system under test could not be run: no request arrived before the idle limit";

pub(super) fn serve(args: &ServeArgs, out: &mut dyn Write, err: &mut dyn Write, terminal: Terminal) -> Exit {
    let style = Style::plain(args.format, false, args.color, terminal);
    let mut reporter = Reporter::new(style);
    let scenario = match crate::load::outside(&args.scenario) {
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
    let dialect = match Dialect::load(&args.runtime) {
        Ok(dialect) => dialect,
        Err(e) => {
            reporter.error(err, &format!("--runtime: {e}"));
            return Exit::BadInput;
        }
    };
    let shim = match args.clock.then(|| crate::drive::find_clock_shim(args.clock_shim.as_deref())) {
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
        side: args.side.clone(),
        barrier: args.barrier.map(Into::into),
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
                    .map_err(|e| wire::ServeError(format!("cannot bind the clock endpoint: {e}")))?,
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
        for line in env_lines(&base, &args.runtime) {
            let _ = writeln!(err, "export {line}");
        }
        if let (Some(endpoint), Some(shim)) = (&endpoint, &shim) {
            endpoint.set_http(vec![server.addr().to_string()]);
            let _ = writeln!(err, "export REHEARSAL_CLOCK={}", endpoint.env_value());
            let _ = writeln!(err, "export PYTHONPATH={}${{PYTHONPATH:+:$PYTHONPATH}}", shim.display());
            let _ = writeln!(err, "export PYTHONHASHSEED=0");
        }
        let _ = err.flush();
        let clock = endpoint.as_ref().map(ClockEndpoint::clock);
        let end = tokio::select! {
            end = server.done() => end,
            _ = tokio::signal::ctrl_c() => End::Caller,
            // A clock that ends by itself no longer moves the runtime: the run is over.
            () = async {
                match &clock {
                    Some(clock) => clock.ended().await,
                    None => std::future::pending().await,
                }
            } => End::Caller,
        };
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
        match clock_stopped {
            // The runtime spoke to the clock and broke off before asking the model anything:
            // the clock's end is the reason, printed as it is.
            Some(end) => reporter.error(
                err,
                &format!("no request arrived: the clock stopped following the runtime before its first request: {end}"),
            ),
            None => reporter.error(err, "no request arrived: the system under test never called the server"),
        }
        return Exit::NotRun;
    }
    let mut verdict = wire::judge(&scenario, &run);
    if let Some(report) = &clock {
        reporter.note(err, &format!("the clock ended at {} virtual", crate::wire::clock::seconds(report.now_ns)));
        verdict.run.elapsed = std::time::Duration::from_nanos(report.now_ns);
        match &report.end {
            ClockEnd::Finished { .. } => {}
            ClockEnd::Stuck { .. } if run.end == End::Script => {}
            end => verdict.failures.insert(
                0,
                crate::judge::Failure::new(
                    crate::judge::FailureKind::Stopped,
                    format!("the clock stopped following the runtime: {end}"),
                    Vec::new(),
                ),
            ),
        }
    }
    reporter.scenario(out, &args.scenario, &verdict);
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

/// The environment lines a runtime takes: the OpenAI SDK's, and the runtime's own.
pub(super) fn env_lines(base: &str, runtime: &str) -> Vec<String> {
    let mut lines = vec![format!("OPENAI_BASE_URL={base}"), "OPENAI_API_KEY=rehearsal".to_string()];
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

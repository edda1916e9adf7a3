//! `rehearsal new NAME [--preset roku|bub]`: a commented starting scenario that passes.
//!
//! JSON has no comments, so the notes are `"$comment"` keys, which the format allows in every
//! object (JSON Schema's own keyword for notes) and rehearsal ignores. The file is written only
//! if nothing is there yet.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::Exit;
use crate::trace::printable;

/// Which family the starting scenario shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum Preset {
    /// Roku: the root hands a task to a foreground `Agent` child and waits for its answer.
    Roku,
    /// Bub: the root starts a background `subagent` child and waits for its result.
    Bub,
}

/// The file `NAME` stands for: `NAME.json`, or `NAME` when it already ends in `.json`. The
/// suffix is appended, never swapped for what follows a dot (`new v1.2` writes `v1.2.json`,
/// not `v1.json`).
fn file_of(name: &Path) -> PathBuf {
    if name.extension().is_some_and(|e| e == "json") {
        return name.to_path_buf();
    }
    let mut file = name.as_os_str().to_owned();
    file.push(".json");
    PathBuf::from(file)
}

/// Writes the starting scenario; refuses to overwrite anything.
pub(super) fn new(name: &Path, preset: Preset, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    let file = file_of(name);
    let shown = printable(&file.to_string_lossy()).into_owned();
    let stem = file.file_stem().map_or_else(|| "scenario".into(), |s| s.to_string_lossy().into_owned());
    let text = starting_scenario(&stem, preset);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&file)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    match written {
        Ok(()) => {
            let _ = writeln!(out, "wrote {shown}; run it with: rehearsal run {shown} --trace");
            Exit::Passed
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let _ =
                writeln!(err, "error: {shown} already exists; not overwritten (choose another name, or move it away)");
            Exit::BadInput
        }
        Err(e) => {
            let _ = writeln!(err, "error: cannot write {shown}: {e}");
            Exit::BadInput
        }
    }
}

/// The text of a starting scenario named `name`.
pub(super) fn starting_scenario(name: &str, preset: Preset) -> String {
    let template = match preset {
        Preset::Roku => ROKU,
        Preset::Bub => BUB,
    };
    let quoted = serde_json::Value::from(name).to_string();
    template.replace("\"NAME\"", &quoted)
}

const ROKU: &str = r#"{
  "$comment": "A starting scenario from `rehearsal new`. Each `$comment` is a note for readers, allowed in any object but a call's `args`, and ignored by rehearsal. Every field, with what it means: `rehearsal schema` (a JSON Schema; save it as scenario.schema.json and add \"$schema\": \"scenario.schema.json\" here for completion in an editor). Run: rehearsal run FILE --trace (`rehearsal run --help` for the flags and exit codes)",
  "name": "NAME",
  "description": "roku.grant.min-remaining-cap, roku.grant.never-refunded: the root hands a task to a foreground child with `Agent`; the child's 10 steps are paid from the root's 30 up front (30 -> 19) and never refunded.",
  "rules": {
    "$comment": "Start from a preset, `roku` or `bub`, and override any knob, e.g. \"root_step_budget\": 5.",
    "preset": "roku"
  },
  "tools": [
    {
      "$comment": "A simulated tool: each call takes latency_ms of virtual time and returns the next result (the last one repeats).",
      "name": "Read", "latency_ms": 50, "results": [{"text": "no errors in the last hour"}]
    }
  ],
  "lanes": [
    {
      "$comment": "What the mock model answers the root agent, `main`: one reply per request, in order.",
      "agent": "main",
      "replies": [
        {"calls": [{"tool": "Agent", "args": {"task": "Summarise the logs"}}], "latency_ms": 100},
        {"text": "The child says: all clear.", "latency_ms": 100}
      ]
    },
    {
      "$comment": "The root's first child is `main/1`. A `check` asserts what the request it answers holds.",
      "agent": "main/1",
      "replies": [
        {"calls": [{"tool": "Read", "args": {"path": "app.log"}}], "latency_ms": 100,
         "check": {"messages": 1, "first_message": "Summarise the logs", "tools_exclude": ["Agent"]}},
        {"text": "All clear.", "latency_ms": 100}
      ]
    }
  ],
  "turns": [
    {
      "$comment": "What the user says, and how the turn must end.",
      "user": "Check the logs",
      "expect": {"outcome": "final_answer", "status": "ok", "message": "The child says: all clear.", "budget_left": 18}
    }
  ],
  "expect": {
    "$comment": "Fragments of the trace that must appear in this order (runs of spaces count as one), and the virtual time the run takes.",
    "trace": ["spawn main/1 foreground cost=1 grant=10 budget=30→19", "tool.end Agent ok budget=19"],
    "elapsed_ms": 450
  }
}
"#;

const BUB: &str = r#"{
  "$comment": "A starting scenario from `rehearsal new`. Each `$comment` is a note for readers, allowed in any object but a call's `args`, and ignored by rehearsal. Every field, with what it means: `rehearsal schema` (a JSON Schema; save it as scenario.schema.json and add \"$schema\": \"scenario.schema.json\" here for completion in an editor). Run: rehearsal run FILE --trace (`rehearsal run --help` for the flags and exit codes)",
  "name": "NAME",
  "description": "bub.spawn.returns-at-once, bub.wait.listed, bub.session.temp-discarded: the root starts a background child with `subagent`, gets its task id at once, and waits for its result with `subagent.wait`; the temp session is discarded.",
  "rules": {
    "$comment": "Start from a preset, `roku` or `bub`, and override any knob, e.g. \"max_concurrency\": 2.",
    "preset": "bub"
  },
  "lanes": [
    {
      "$comment": "What the mock model answers the root agent, `main`: one reply per request, in order. `$task1` is the first task id the request shows, as a model would copy it.",
      "agent": "main",
      "replies": [
        {"calls": [{"tool": "subagent", "args": {"prompt": "Summarise the logs", "session": "temp"}}], "latency_ms": 100},
        {"calls": [{"tool": "subagent.wait", "args": {"task_ids": ["$task1"], "timeout_seconds": 60}}], "latency_ms": 10},
        {"text": "The child says: all clear.", "latency_ms": 100}
      ]
    },
    {
      "$comment": "A lane may pick children by a text their task contains. A `check` asserts what the request it answers holds.",
      "task_contains": "logs",
      "replies": [
        {"text": "All clear.", "latency_ms": 200, "check": {"messages": 1, "first_message": "Summarise the logs"}}
      ]
    }
  ],
  "turns": [
    {
      "$comment": "What the user says, and how the turn must end.",
      "user": "Check the logs",
      "expect": {"outcome": "final_answer", "status": "ok", "message": "The child says: all clear.", "budget_left": 17}
    }
  ],
  "expect": {
    "$comment": "Fragments of the trace that must appear in this order (runs of spaces count as one; `$task1` is the run's first task id), and the virtual time the run takes.",
    "trace": ["task.queued $task1 session=temp", "session.close temp/$task1 discarded", "delivered $task1 completed via=wait"],
    "elapsed_ms": 400
  }
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dotted_name_keeps_its_dots_in_the_file_name() {
        // Not `v1.json`: the suffix is appended, never swapped for what follows a dot.
        assert_eq!(file_of(Path::new("v1.2")), PathBuf::from("v1.2.json"));
        assert_eq!(file_of(Path::new("dir/a.b.c")), PathBuf::from("dir/a.b.c.json"));
        assert_eq!(file_of(Path::new("x.json")), PathBuf::from("x.json"));
        assert_eq!(file_of(Path::new("x")), PathBuf::from("x.json"));
    }
}

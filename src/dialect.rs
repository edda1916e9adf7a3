//! Dialects: how one agent runtime spells sub-agents to the model, as data.
//!
//! A model endpoint sees only requests and replies. To put each request down to an agent
//! (`evidence::attribution`) and to judge it (`oracles::model_side`), the harness must know how
//! the runtime under test writes a few things: which tools spawn a child and which argument is
//! the child's prompt, whether a spawn call answers with the child's result (synchronous) or
//! with a task id whose result comes later (asynchronous), which argument picks a forked or
//! named conversation, which tools end a loop and where their final text stands, which
//! results mean "no child was made", how a late result is written into the parent's
//! conversation, and whether the runtime compacts history. A [`Dialect`] holds exactly that.
//!
//! The name is chosen so that it is not confused with the two other kinds of configuration of
//! this crate: agent *profiles* (`profiles`, what a child is told) and rule *presets*
//! (`rules`, the knobs of a family). A dialect says nothing about limits; the rules do.
//!
//! API:
//! - [`Dialect::builtin`]`(name)`: the built-in dialects: `roku` (the built-in core's `Agent`
//!   family), `bub` (the built-in core's `subagent` family), `rehearsal` (both, as the built-in
//!   core offers them when a scenario mixes the families), `bub-0.5.1` (the real `bub` 0.5.1
//!   from PyPI: one synchronous `subagent` tool with `prompt`, `allowed_tools`, `session`) and
//!   `generic` (a synchronous `spawn_agent{prompt}`, for runtimes that wrote their own).
//! - [`Dialect::from_json`]`(text, file)`: a dialect a user wrote, in the JSON form of
//!   [`Dialect`] (field names as below; unknown fields are an error naming line and column).
//! - [`Dialect::load`]`(name_or_path)`: a built-in name, or a `.json` file.
//!
//! What this module deliberately does not do: parse requests, or decide anything about a run.
//! It is the vocabulary the attribution and the model-side oracles read, and the one place
//! the wire's runtime descriptions read it from.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

// The depth error (`core.depth.guard-error`) and the empty task are refusals in every
// built-in dialect.
use crate::rules::words::{DEPTH_ERROR, NO_TASK};

/// How one runtime spells sub-agents to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dialect {
    /// The dialect's name, for messages.
    pub name: String,
    /// The tools that start a child.
    pub spawn: Vec<SpawnTool>,
    /// The tools that hand a message to an existing child's task, or continue it.
    #[serde(default)]
    pub send: Vec<SendTool>,
    /// The tools that end a loop, and the argument holding the loop's final text. A reply
    /// without calls ends a loop too, its text being the final text.
    #[serde(default)]
    pub terminal: Vec<TerminalTool>,
    /// Result texts (prefixes) that mean a spawn call made no child.
    #[serde(default)]
    pub refusals: Vec<String>,
    /// How an asynchronous child's result is written into its parent's conversation.
    #[serde(default)]
    pub notification: Option<Notification>,
    /// Whether, and how, the runtime compacts an agent's history. `None`: it never does, so
    /// every request of an agent extends its previous one.
    #[serde(default)]
    pub compaction: Option<Compaction>,
    /// How the user messages the runtime itself writes into a loop begin (budget nudges):
    /// the only user messages a child's loop may gain besides what is sent to it.
    #[serde(default)]
    pub notices: Vec<String>,
    /// The tool that waits for asynchronous results and returns them as a JSON array of
    /// `{"task_id":…,"status":…,"result":…}`, if any.
    #[serde(default)]
    pub wait: Option<String>,
    /// The final text the runtime writes for a reply with neither calls nor text, if it
    /// writes one (the built-in core: `Runtime loop completed.`, `roku.loop.empty-text-completed`).
    #[serde(default)]
    pub empty_text: Option<String>,
    /// Whether the tool calls of one reply run at the same time (bub 0.5.1 gathers them),
    /// rather than one after another (the default). Attribution reads the order of a reply's
    /// synchronous children from it: run in order, an earlier call with no child by the time
    /// a later one asks made none; run together, the children may ask in any order.
    #[serde(default)]
    pub parallel_calls: bool,
    /// The tools that cancel a task (`subagent.cancel`). Attribution reads them to tell which
    /// continuation asked: in a dialect whose calls run one after another, a send followed in
    /// its reply by a cancel of the same task continued a run that was cancelled.
    #[serde(default)]
    pub cancel: Vec<CancelTool>,
    /// The tools that hand the conversation to another agent, which does not hand it back
    /// (openai-agents' `transfer_to_<agent>`): a name, or a prefix ending in `*`. After a
    /// reply holding one, the conversation's next request is the target agent's first, with
    /// its own alias (numbered as a child of the agent that handed off), system prompt and
    /// tools; the agent that handed off asks no more in that conversation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub handoff: Vec<String>,
    /// The tools only the root is offered, never a child (Roku's and the built-in core's
    /// `ask_user`: `roku.child.tools`, `bub.child.tools-default`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub root_only: Vec<String>,
    /// Whether a child is offered at most its parent's tools, a narrowing of them (Roku's
    /// `roku.child.tools`, the built-in core's `bub.child.tools-at-most-parent`); `false` (the
    /// default): a child may have tools of its own (openai-agents' agents as tools).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub child_tools_within_parent: bool,
    /// How the runtime writes an agent's history into its next request: [`History::Kept`]
    /// (the default: the messages as sent, the reply as given) or re-rendered as text
    /// ([`History::Rendered`], smolagents).
    #[serde(default, skip_serializing_if = "History::is_kept")]
    pub history: History,
}

/// How a runtime writes an agent's history into its next request: what "the agent's next
/// request goes on from its last one and the reply it was given" means for it. The attribution
/// (an agent going on), `oracle.model-side.append-only` and every oracle that reads a reply in
/// the next request compare by it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum History {
    /// Kept as given: the next request begins with the last one's messages, unchanged, then the
    /// reply as an assistant message with its text and its calls (names and arguments, in
    /// order; ids the runtime's), then the calls' results as `tool` messages.
    #[default]
    Kept,
    /// Re-rendered as text, as smolagents writes it: the next request begins with the last
    /// one's messages, unchanged, then the reply as one assistant message of text alone (its
    /// text, trimmed, then the `calls` line and a printout holding each call's name and, as
    /// `arguments` says, its arguments); its results are the runtime's own user messages. Or,
    /// when a call of the reply raised, no assistant message at all: the last one's messages
    /// with its last user message grown by appended text (smolagents merges the error into it).
    /// Nothing else may change: a dropped, rewritten or reordered message is still a finding.
    /// Written `{"rendered": {"calls": "Calling tools:", "arguments": "python"}}`.
    Rendered {
        /// The text that introduces the calls, after the reply's text and a line break
        /// (smolagents: `Calling tools:`).
        calls: String,
        /// How each call's arguments stand in the printout; absent: only the calls' names are
        /// compared.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        arguments: Option<Printed>,
    },
}

impl History {
    /// Whether this is [`History::Kept`], the default.
    pub fn is_kept(&self) -> bool {
        *self == History::Kept
    }
}

/// How a runtime prints a call's arguments, or one argument's value, into a text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Printed {
    /// Python's `repr` of the value parsed from JSON: strings quoted as Python quotes them,
    /// `True`, `False`, `None`, dicts in the order given. In a re-rendered reply (smolagents'
    /// `str([{'id': …, 'type': 'function', 'function': {'name': N, 'arguments': A}}])`) the
    /// printout holds `'name': N, 'arguments': A` for each call. A value holding a non-integer
    /// number, or a character whose printing Python decides by its Unicode tables (any
    /// non-ASCII character), has no printing rehearsal is sure of: a call's arguments are then
    /// compared by its name alone, and a wrap suffix by the text around the value.
    Python,
}

impl Printed {
    /// `value` as this printing writes it; `None` when it is not sure how.
    pub fn print(self, value: &serde_json::Value) -> Option<String> {
        match self {
            Printed::Python => python_repr(value),
        }
    }
}

/// Python's `repr` of a value parsed from JSON (`json.loads`), or `None` where rehearsal is not
/// sure how Python prints it (a float, any non-ASCII character: Python's Unicode tables are not
/// Rust's).
pub(crate) fn python_repr(value: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    Some(match value {
        Value::Null => "None".to_string(),
        Value::Bool(true) => "True".to_string(),
        Value::Bool(false) => "False".to_string(),
        Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
        Value::Number(_) => return None,
        Value::String(s) => python_str(s)?,
        Value::Array(items) => {
            format!("[{}]", items.iter().map(python_repr).collect::<Option<Vec<_>>>()?.join(", "))
        }
        Value::Object(map) => {
            let entries: Option<Vec<String>> =
                map.iter().map(|(k, v)| Some(format!("{}: {}", python_str(k)?, python_repr(v)?))).collect();
            format!("{{{}}}", entries?.join(", "))
        }
    })
}

/// Python's `repr` of a string: single quotes, unless it holds a single quote and no double one.
fn python_str(s: &str) -> Option<String> {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_ascii_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_ascii() => out.push(c),
            // Whether Python prints a non-ASCII character or escapes it follows its Unicode
            // tables, which differ by version from Rust's (U+1C89 is a letter in Unicode 16 and
            // unassigned in Python 3.12's 15.0): not sure, so not printed (blind review 39).
            _ => return None,
        }
    }
    out.push(quote);
    Some(out)
}

/// A tool that cancels a task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelTool {
    /// The tool's name.
    pub name: String,
    /// The argument holding the task id.
    pub task_id: String,
}

/// A tool that starts a child.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpawnTool {
    /// The tool's name, as the model calls it.
    pub name: String,
    /// The argument whose text (trimmed) is the child's prompt: its first user message.
    pub prompt: String,
    /// How the child's result comes back.
    pub result: ResultMode,
    /// The argument naming the child's conversation (`temp`, `fork`, or a name), if any.
    #[serde(default)]
    pub session: Option<String>,
    /// The values of `session` that start the child from its parent's conversation.
    #[serde(default)]
    pub fork_values: Vec<String>,
    /// The values of `session` that start the child from nothing (besides the absent one).
    #[serde(default)]
    pub temp_values: Vec<String>,
    /// The argument naming the child's profile, if any.
    #[serde(default)]
    pub profile: Option<String>,
    /// The argument giving the child's time limit in seconds, if any.
    #[serde(default)]
    pub timeout_seconds: Option<String>,
    /// For an asynchronous tool: the field of its JSON result holding the task id.
    #[serde(default)]
    pub task_id_field: Option<String>,
    /// The argument naming the child's model, if any.
    #[serde(default)]
    pub model: Option<String>,
    /// The argument listing the tools the child may have (a list, or one comma-separated
    /// string): a call naming a tool its caller was not offered makes no child.
    #[serde(default)]
    pub tools: Option<String>,
    /// The argument listing the skills the child may have (a list, or one comma-separated
    /// string): a call naming a skill its caller lacks makes no child.
    #[serde(default)]
    pub skills: Option<String>,
    /// What the parent is handed for a child stopped by its time limit, `{seconds}` standing
    /// for the limit (`120`, `0.5`); `None`: the dialect does not say.
    #[serde(default)]
    pub timeout_text: Option<String>,
    /// How the runtime writes the prompt as the child's first user message; absent: the
    /// prompt alone, trimmed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrap: Option<PromptWrap>,
    /// Whether the runtime hands the prompt over as written, spaces and all, refusing only an
    /// empty one (bub 0.5.1: `if not prompt`); `false` (the default): it is trimmed, and a blank
    /// prompt makes no child.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub untrimmed: bool,
    /// Whether an empty prompt still starts a child, with an empty first message (pydantic-ai:
    /// a delegation tool runs its delegate on whatever the model passed); `false` (the
    /// default): an empty prompt makes no child.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub empty_starts: bool,
    /// Whether a child whose final reply is empty hands back the latest non-empty text of its
    /// run instead, an assistant message's or a tool result's (openai-agents' `as_tool`);
    /// `false` (the default): its result is its final reply, empty too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub empty_falls_back: bool,
    /// Whether the model argument is `provider:model` and the child's requests name the part
    /// after the first `:` (bub 0.5.1, pydantic-ai); `false`: they name the argument as given.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub model_provider: bool,
    /// The argument naming the child's reasoning effort, if any (`bub.child.model`: the call's,
    /// else its profile's, else the parent's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// Argument values that run a call of an asynchronous tool in the foreground: a call whose
    /// arguments hold every one of them waits for its child, and its result is the child's
    /// hand-over, as under `result: sync` (Claude Code's `Agent` with `"run_in_background":
    /// false`). Empty (the default): every call runs as `result` says.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sync_when: BTreeMap<String, serde_json::Value>,
    /// For an asynchronous tool whose result is text, not JSON: the text the task id follows
    /// in it (`"agentId: "`); the id is what follows, up to the first white space. Either this
    /// or `task_id_field` is required for an asynchronous tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id_after: Option<String>,
    /// How a foreground call's result wraps the child's final reply, if the runtime wraps it
    /// (Claude Code's `[Subagent hand-back]` frame); absent: the result is the reply itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hand_back: Option<HandBack>,
}

/// How a runtime frames a foreground child's final reply in its spawn call's result: `before`,
/// then the reply with every line indented by `indent` (an empty line may lose it), then a
/// line that begins with `after` and whatever the runtime writes after it (an agent id, the
/// run's usage). What stands before `before` is the runtime's own too. Claude Code 2.1.337
/// writes `[Subagent hand-back] … The report follows:\n`, indents by two spaces and goes on
/// with `agentId: …`; for a child that called tools it first lists them
/// (`  <tools-used-before-summary>Agent</tools-used-before-summary>\n  \n`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HandBack {
    /// The text before the reply.
    pub before: String,
    /// What begins every line of the reply.
    #[serde(default)]
    pub indent: String,
    /// What the line after the reply begins with.
    pub after: String,
}

impl HandBack {
    /// The reply `result` frames, its indent removed; `None` when `result` is not framed so.
    pub fn report_in(&self, result: &str) -> Option<String> {
        let (_, rest) = result.split_once(self.before.as_str())?;
        let needle = format!("\n{}", self.after);
        let at = rest.rfind(needle.as_str())?;
        let lines: Option<Vec<&str>> = rest[..at]
            .split('\n')
            .map(|line| line.strip_prefix(self.indent.as_str()).or(line.trim().is_empty().then_some("")))
            .collect();
        Some(lines?.join("\n"))
    }
}

/// How a runtime wraps a spawn call's prompt into its child's first user message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(from = "WrapForm", into = "WrapForm")]
pub enum PromptWrap {
    /// A template, `{prompt}` standing for the prompt (trimmed), the whole message compared
    /// after trimming: `{"template": "Your task:\n{prompt}"}`; or, with a trailing part written
    /// only for calls that give an argument, `{"template": {"text": "…{prompt}…", "suffix":
    /// {…}}}` ([`Suffix`]).
    Template {
        /// The message, `{prompt}` standing for the prompt.
        text: String,
        /// A trailing part written after it for a call that gives an argument, if any.
        suffix: Option<Suffix>,
    },
    /// The call's arguments as JSON after a preamble (openai-agents' `as_tool` with structured
    /// parameters): the message, trimmed, is the preamble, then a JSON object equal to the
    /// call's arguments: `{"arguments": {"preamble": "Input:"}}`. Optionally the JSON stands
    /// between an `open` and a `close` text (a heading and a code fence), and the message may
    /// go on after `close` with a text that begins with `after` (the runtime's own: openai-agents
    /// 0.24 writes its input schema's summary there).
    Arguments {
        /// The text before the JSON.
        preamble: String,
        /// The text between the preamble and the JSON (trimmed both sides); empty: none.
        open: String,
        /// The text right after the JSON (trimmed both sides); empty: none.
        close: String,
        /// What the rest of the message, after `close`, begins with; `None`: nothing follows.
        after: Option<String>,
    },
}

impl PromptWrap {
    /// A template with no trailing part: `{prompt}` standing for the prompt.
    pub fn template(text: impl Into<String>) -> PromptWrap {
        PromptWrap::Template { text: text.into(), suffix: None }
    }

    /// The call's arguments as JSON right after `preamble`, nothing around them.
    pub fn arguments(preamble: impl Into<String>) -> PromptWrap {
        PromptWrap::Arguments { preamble: preamble.into(), open: String::new(), close: String::new(), after: None }
    }
}

/// The written form of a [`PromptWrap`]: a template is a string, or `{"text": …, "suffix": …}`.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum WrapForm {
    Template(TemplateForm),
    Arguments {
        preamble: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        open: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        close: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after: Option<String>,
    },
}

/// The two written forms of a template.
#[derive(Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum TemplateForm {
    Text(String),
    Parts {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        suffix: Option<Suffix>,
    },
}

impl From<WrapForm> for PromptWrap {
    fn from(form: WrapForm) -> PromptWrap {
        match form {
            WrapForm::Template(TemplateForm::Text(text)) => PromptWrap::Template { text, suffix: None },
            WrapForm::Template(TemplateForm::Parts { text, suffix }) => PromptWrap::Template { text, suffix },
            WrapForm::Arguments { preamble, open, close, after } => {
                PromptWrap::Arguments { preamble, open, close, after }
            }
        }
    }
}

impl From<PromptWrap> for WrapForm {
    fn from(wrap: PromptWrap) -> WrapForm {
        match wrap {
            PromptWrap::Template { text, suffix: None } => WrapForm::Template(TemplateForm::Text(text)),
            PromptWrap::Template { text, suffix } => WrapForm::Template(TemplateForm::Parts { text, suffix }),
            PromptWrap::Arguments { preamble, open, close, after } => {
                WrapForm::Arguments { preamble, open, close, after }
            }
        }
    }
}

/// A trailing part of a wrap, written after the template exactly when the call gives
/// `argument` a value Python reads as true (not absent, `null`, `false`, `0`, `""`, `[]` or
/// `{}`), as smolagents writes a managed agent's `additional_args`:
/// `{"argument": "additional_args", "text": "\nYou have been provided with these additional
/// arguments, that you can access directly using the keys as variables:\n{value}.", "print":
/// "python"}`. Without the argument the message is the template alone; with it, the template
/// then this text, nothing else.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suffix {
    /// The argument whose value the suffix writes.
    pub argument: String,
    /// The text, `{value}` standing for the argument's value.
    pub text: String,
    /// How the value is printed.
    pub print: Printed,
}

impl Suffix {
    /// The suffix a call with `args` is written with: `Some("")` when the call gives the
    /// argument no true value (nothing is appended), `None` when its value cannot be printed
    /// surely (no message matches).
    /// The suffix a call with `args` is written with: `Ok` with the text (empty when the
    /// argument is not given), or, when its value is one rehearsal cannot print as Python would,
    /// `Err` with the texts before and after the value.
    fn for_call(&self, args: &serde_json::Value) -> Result<String, (String, String)> {
        use serde_json::Value;
        let value = match args.get(&self.argument) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => return Ok(String::new()),
            Some(Value::String(s)) if s.is_empty() => return Ok(String::new()),
            Some(Value::Array(a)) if a.is_empty() => return Ok(String::new()),
            Some(Value::Object(o)) if o.is_empty() => return Ok(String::new()),
            Some(Value::Number(n)) if n.as_f64() == Some(0.0) => return Ok(String::new()),
            Some(v) => v,
        };
        match self.print.print(value) {
            Some(printed) => Ok(self.text.replace("{value}", &printed)),
            None => {
                let (before, after) = self.text.split_once("{value}").unwrap_or((&self.text, ""));
                Err((before.to_string(), after.to_string()))
            }
        }
    }
}

/// How a spawn call's result comes back to the parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultMode {
    /// The call waits for the child; its tool result is the child's hand-over.
    Sync,
    /// The call returns a task id at once; the hand-over comes later, as a notification or
    /// the answer of a waiting tool.
    Async,
}

/// A tool that hands a message to a child's task (or continues a finished one).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendTool {
    /// The tool's name.
    pub name: String,
    /// The argument holding the task id.
    pub task_id: String,
    /// The argument holding the message.
    pub message: String,
    /// The field of its JSON result present when the send continued a finished task in a new
    /// run (rather than handing the message to the running one), if the dialect says.
    #[serde(default)]
    pub continued_field: Option<String>,
}

/// A tool that ends a loop.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TerminalTool {
    /// The tool's name.
    pub name: String,
    /// The argument holding the loop's final text.
    pub text: String,
    /// The final text when the argument is missing or empty, if the runtime writes one.
    #[serde(default)]
    pub default: Option<String>,
}

/// How an asynchronous result is written into the parent's conversation: the whole user
/// message framed (Bub), or elements between tags anywhere in it ([`Tagged`], Claude Code).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged, deny_unknown_fields)]
pub enum Notification {
    /// The user message is one notification,
    /// `{open}{task id}{middle}{status}{close_open}\n{body}\n{close}`, as Bub writes
    /// `<subagent-notification task_id="sub-1" status="completed">\nbody\n</subagent-notification>`.
    Framed {
        /// The text before the task id.
        open: String,
        /// The text between the task id and the status.
        middle: String,
        /// The text after the status, before the newline and the body.
        close_open: String,
        /// The text after the body and its newline.
        close: String,
    },
    /// The user message holds one or more notifications, each an element with tagged fields.
    Tagged {
        /// The tags.
        tagged: Tagged,
    },
}

/// Notifications written as elements with tagged fields, any number in one user message and
/// anything around them (Claude Code 2.1.337 writes a `<system-reminder>` preamble, then
/// `<task-notification>\n<task-id>ID</task-id>\n…<status>completed</status>\n…<result>TEXT</result>\n…</task-notification>`,
/// and two notifications taken in together as two text blocks of one message). Each field is
/// an opening and a closing tag. An element runs from its opening tag to the last closing tag
/// before the next element opens; its body from the first body tag to the last closing body
/// tag within it, so a body may hold any text but the element's opening tag.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tagged {
    /// The element's tags: `["<task-notification>", "</task-notification>"]`.
    pub element: [String; 2],
    /// The task id's tags: `["<task-id>", "</task-id>"]`.
    pub task_id: [String; 2],
    /// The status word's tags: `["<status>", "</status>"]`.
    pub status: [String; 2],
    /// The body's tags: `["<result>", "</result>"]`; an element without them has an empty body.
    pub body: [String; 2],
    /// Whether the runtime writes the body with `<`, `>` and `&` escaped as `&lt;`, `&gt;` and
    /// `&amp;` (Claude Code 2.1.337 does, in a background result), so that it is read back
    /// unescaped: a report holding `a < b` is handed over whole, not changed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub escaped: bool,
}

/// `text` with `&lt;`, `&gt;` and `&amp;` read back as `<`, `>` and `&` (`&amp;` last, so that
/// `&amp;lt;` is `&lt;`), borrowed when it holds none.
fn unescape(text: &str) -> Cow<'_, str> {
    if !text.contains('&') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let (c, len) = [("&lt;", '<'), ("&gt;", '>'), ("&amp;", '&')]
            .iter()
            .find(|(e, _)| tail.starts_with(e))
            .map_or(('&', 1), |(e, c)| (*c, e.len()));
        out.push(c);
        rest = &tail[len..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

impl Tagged {
    /// The notifications in `text`, in order.
    fn read<'a>(&self, text: &'a str) -> Vec<Notified<'a>> {
        let [open, close] = &self.element;
        let mut found = Vec::new();
        let starts: Vec<usize> = text.match_indices(open.as_str()).map(|(at, _)| at + open.len()).collect();
        for (k, &start) in starts.iter().enumerate() {
            let next = starts.get(k + 1).map_or(text.len(), |&n| n - open.len());
            let piece = &text[start..next];
            let Some(end) = piece.rfind(close.as_str()) else { continue };
            let element = &piece[..end];
            let field = |[o, c]: &[String; 2], last: bool| -> Option<&'a str> {
                let from = element.find(o.as_str())? + o.len();
                let rest = &element[from..];
                let to = if last { rest.rfind(c.as_str())? } else { rest.find(c.as_str())? };
                Some(&text[start + from..start + from + to])
            };
            let (Some(task_id), Some(status)) = (field(&self.task_id, false), field(&self.status, false)) else {
                continue;
            };
            let body = field(&self.body, true).unwrap_or_default();
            let body = if self.escaped { unescape(body) } else { Cow::Borrowed(body) };
            found.push(Notified { task_id, status, body });
        }
        found
    }
}

/// The framed notification `text` is, if it is one: `[open, middle, close_open, close]`.
fn framed<'a>([open, middle, close_open, close]: [&String; 4], text: &'a str) -> Option<Notified<'a>> {
    let rest = text.strip_prefix(open.as_str())?;
    let (task_id, rest) = rest.split_once(middle.as_str())?;
    let (status, rest) = rest.split_once(close_open.as_str())?;
    let body = rest.strip_prefix('\n')?.strip_suffix(close.as_str())?;
    let body = body.strip_suffix('\n').unwrap_or(body);
    Some(Notified { task_id, status, body: Cow::Borrowed(body) })
}

/// A declared compaction: the runtime may replace the start of an agent's history by one user
/// message beginning with `summary_prefix`; everything after the replaced part is kept.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Compaction {
    /// How the summary message begins.
    pub summary_prefix: String,
}

/// A notification read out of a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notified<'a> {
    /// The task id.
    pub task_id: &'a str,
    /// The status word.
    pub status: &'a str,
    /// The body (unescaped where the dialect says the runtime escapes it).
    pub body: Cow<'a, str>,
}

/// A dialect file that could not be read: which file, and what in it.
#[derive(Debug)]
pub enum DialectError {
    /// `name_or_path` is neither a built-in dialect nor a file that could be read.
    Unreadable {
        /// The name or path given.
        name_or_path: String,
        /// The built-in dialects ([`BUILTIN`]).
        builtins: &'static [&'static str],
        /// Why the file could not be read.
        source: std::io::Error,
    },
    /// The file is not a dialect in JSON (a syntax error, an unknown or missing field).
    NotADialect {
        /// The file.
        file: String,
        /// The line (from 1) the parser stopped at.
        line: usize,
        /// The column (from 1) the parser stopped at.
        column: usize,
        /// The parser's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// `spawn` is empty.
    NoSpawnTool {
        /// The file.
        file: String,
    },
    /// An arguments wrap whose message goes on `after` the JSON with no `close` to end it.
    AfterWithoutClose {
        /// The file.
        file: String,
        /// Its place in `spawn`.
        index: usize,
        /// The tool's name.
        tool: String,
    },
    /// An asynchronous spawn tool without a `task_id_field` or `task_id_after`.
    AsyncWithoutTaskId {
        /// The file.
        file: String,
        /// Its place in `spawn`.
        index: usize,
        /// The tool's name.
        tool: String,
    },
}

impl std::fmt::Display for DialectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DialectError::Unreadable { name_or_path, builtins, source } => write!(
                f,
                "{name_or_path}: neither a built-in dialect ({}) nor a readable file: {source}",
                builtins.join(", ")
            ),
            DialectError::NotADialect { file, line, column, source } => {
                write!(f, "{file}:{line}:{column}: not a dialect: {source}")
            }
            DialectError::NoSpawnTool { file } => {
                write!(f, "{file}: `spawn` names no tool; a dialect needs at least one")
            }
            DialectError::AfterWithoutClose { file, index, tool } => write!(
                f,
                "{file}: spawn[{index}] ({tool}): wrap.arguments.after needs a `close`: the text that ends the JSON"
            ),
            DialectError::AsyncWithoutTaskId { file, index, tool } => write!(
                f,
                "{file}: spawn[{index}] ({tool}) is async but has no `task_id_field` (or `task_id_after`): its results could not be told apart"
            ),
        }
    }
}

impl std::error::Error for DialectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DialectError::Unreadable { source, .. } => Some(source),
            DialectError::NotADialect { source, .. } => Some(&**source),
            DialectError::NoSpawnTool { .. }
            | DialectError::AsyncWithoutTaskId { .. }
            | DialectError::AfterWithoutClose { .. } => None,
        }
    }
}

/// The names of the built-in dialects.
pub const BUILTIN: [&str; 5] = ["roku", "bub", "rehearsal", "bub-0.5.1", "generic"];

/// What the built-in core answers for a reply with neither calls nor text.
const EMPTY_TEXT: &str = "Runtime loop completed.";

fn roku_agent() -> SpawnTool {
    SpawnTool {
        name: "Agent".into(),
        prompt: "task".into(),
        result: ResultMode::Sync,
        session: None,
        fork_values: Vec::new(),
        temp_values: Vec::new(),
        profile: None,
        timeout_seconds: None,
        task_id_field: None,
        model: None,
        tools: None,
        skills: None,
        timeout_text: Some("[Sub-agent error] Timed out after {seconds} seconds.".into()),
        wrap: None,
        untrimmed: false,
        empty_starts: false,
        empty_falls_back: false,
        model_provider: false,
        reasoning_effort: None,
        sync_when: BTreeMap::new(),
        task_id_after: None,
        hand_back: None,
    }
}

fn bub_subagent() -> SpawnTool {
    SpawnTool {
        name: "subagent".into(),
        prompt: "prompt".into(),
        result: ResultMode::Async,
        session: Some("session".into()),
        fork_values: vec!["fork".into(), "inherit".into()],
        temp_values: vec!["temp".into()],
        profile: Some("agent".into()),
        timeout_seconds: Some("timeout_seconds".into()),
        task_id_field: Some("task_id".into()),
        model: Some("model".into()),
        tools: Some("allowed_tools".into()),
        skills: Some("allowed_skills".into()),
        timeout_text: Some("Timed out after {seconds} seconds.".into()),
        wrap: None,
        untrimmed: false,
        empty_starts: false,
        empty_falls_back: false,
        model_provider: false,
        reasoning_effort: Some("reasoning_effort".into()),
        sync_when: BTreeMap::new(),
        task_id_after: None,
        hand_back: None,
    }
}

fn nudges() -> Vec<String> {
    vec!["System: step budget exhausted".into()]
}

fn terminals() -> Vec<TerminalTool> {
    vec![
        TerminalTool { name: "final_answer".into(), text: "message".into(), default: None },
        TerminalTool { name: "fail".into(), text: "reason".into(), default: Some("LLM reported failure.".into()) },
    ]
}

/// The refusals of the built-in core: the depth guard, an empty task, a denied call, and the
/// refusals of a `subagent` call (`bub.spawn.*`, `bub.session.named-one-at-a-time`). The
/// unknown-tool answers of both presets are refusals too.
fn builtin_refusals() -> Vec<String> {
    [
        DEPTH_ERROR,
        NO_TASK,
        "[Tool denied]",
        "tool `Agent` is not enabled",
        "tool `subagent` is not enabled",
        "Unknown tool name: Agent.",
        "Unknown tool name: subagent.",
        "error: empty prompt",
        "unknown agent profile: ",
        "unknown tool name(s): ",
        "unknown skill name(s): ",
        "session '",
    ]
    .map(String::from)
    .to_vec()
}

impl Dialect {
    /// The built-in dialect called `name` (one of [`BUILTIN`]).
    pub fn builtin(name: &str) -> Option<Dialect> {
        let bub_send = || SendTool {
            name: "subagent.send".into(),
            task_id: "task_id".into(),
            message: "message".into(),
            continued_field: Some("session".into()),
        };
        let notification = || Notification::Framed {
            open: "<subagent-notification task_id=\"".into(),
            middle: "\" status=\"".into(),
            close_open: "\">".into(),
            close: "</subagent-notification>".into(),
        };
        Some(match name {
            "roku" => Dialect {
                name: name.into(),
                spawn: vec![roku_agent()],
                send: Vec::new(),
                terminal: terminals(),
                refusals: builtin_refusals(),
                notification: None,
                compaction: None,
                notices: nudges(),
                wait: None,
                empty_text: Some(EMPTY_TEXT.into()),
                parallel_calls: false,
                cancel: Vec::new(),
                handoff: Vec::new(),
                root_only: vec!["ask_user".into()],
                child_tools_within_parent: true,
                history: History::Kept,
            },
            "bub" => Dialect {
                name: name.into(),
                spawn: vec![bub_subagent()],
                send: vec![bub_send()],
                terminal: terminals(),
                refusals: builtin_refusals(),
                notification: Some(notification()),
                compaction: None,
                notices: nudges(),
                wait: Some("subagent.wait".into()),
                empty_text: Some(EMPTY_TEXT.into()),
                parallel_calls: false,
                cancel: vec![CancelTool { name: "subagent.cancel".into(), task_id: "task_id".into() }],
                handoff: Vec::new(),
                root_only: vec!["ask_user".into()],
                child_tools_within_parent: true,
                history: History::Kept,
            },
            // The built-in core speaks both families at once.
            "rehearsal" => {
                Dialect { name: name.into(), spawn: vec![roku_agent(), bub_subagent()], ..Dialect::builtin("bub")? }
            }
            // bub 0.5.1 as shipped on PyPI: `subagent` runs the child to its end and returns
            // its output; `session` picks the child's tape; no task ids, no notifications.
            "bub-0.5.1" => Dialect {
                name: name.into(),
                spawn: vec![SpawnTool {
                    name: "subagent".into(),
                    prompt: "prompt".into(),
                    result: ResultMode::Sync,
                    session: Some("session".into()),
                    fork_values: vec!["inherit".into()],
                    temp_values: vec!["temp".into()],
                    profile: None,
                    timeout_seconds: None,
                    task_id_field: None,
                    // `SubAgentInput.model`, the child's model (docs/bub-0.5.1-source.md, section 6).
                    model: Some("model".into()),
                    tools: None,
                    skills: None,
                    timeout_text: None,
                    wrap: None,
                    untrimmed: true,
                    empty_starts: false,
                    empty_falls_back: false,
                    model_provider: true,
                    reasoning_effort: None,
                    sync_when: BTreeMap::new(),
                    task_id_after: None,
                    hand_back: None,
                }],
                send: Vec::new(),
                terminal: Vec::new(),
                // A child's call of the tool it was not offered gets bub's unknown-tool guidance
                // (docs/rules/bub-0.5.1.md, bub051.tools.not-offered-not-run): no child is made.
                // bub's tool-error JSON for a call that failed before any child started: bad
                // arguments, and unknown tool names (bub051.result.tool-error).
                refusals: vec![
                    "Error:".into(),
                    "Tool `subagent` does not exist.".into(),
                    r#"{"kind": "invalid_input""#.into(),
                    r#"{"kind": "tool", "message": "Tool 'subagent' execution failed.", "details": {"error": "ValueError(\"unknown tool name(s):"#.into(),
                ],
                notification: None,
                compaction: None,
                notices: Vec::new(),
                wait: None,
                empty_text: None,
                // `asyncio.gather` over the reply's calls (bub051.parallel.one-reply).
                parallel_calls: true,
                cancel: Vec::new(),
                handoff: Vec::new(),
                root_only: Vec::new(),
                child_tools_within_parent: false,
                history: History::Kept,
            },
            "generic" => Dialect {
                name: name.into(),
                spawn: vec![SpawnTool {
                    name: "spawn_agent".into(),
                    prompt: "prompt".into(),
                    result: ResultMode::Sync,
                    session: None,
                    fork_values: Vec::new(),
                    temp_values: Vec::new(),
                    profile: None,
                    timeout_seconds: None,
                    task_id_field: None,
                    model: None,
                    tools: None,
                    skills: None,
                    timeout_text: None,
                    wrap: None,
                    untrimmed: false,
                    empty_starts: false,
                    empty_falls_back: false,
                    model_provider: false,
                    reasoning_effort: None,
                    sync_when: BTreeMap::new(),
                    task_id_after: None,
                    hand_back: None,
                }],
                send: Vec::new(),
                terminal: Vec::new(),
                refusals: Vec::new(),
                notification: None,
                compaction: None,
                notices: Vec::new(),
                wait: None,
                empty_text: None,
                parallel_calls: false,
                cancel: Vec::new(),
                handoff: Vec::new(),
                root_only: Vec::new(),
                child_tools_within_parent: false,
                history: History::Kept,
            },
            _ => return None,
        })
    }

    /// A dialect written as JSON; `file` names it in errors.
    pub fn from_json(text: &str, file: &str) -> Result<Dialect, DialectError> {
        let dialect: Dialect = serde_json::from_str(text).map_err(|e| DialectError::NotADialect {
            file: file.to_string(),
            line: e.line(),
            column: e.column(),
            source: Box::new(e),
        })?;
        dialect.check(file)?;
        Ok(dialect)
    }

    /// What a dialect's types cannot say: at least one spawn tool, and a task id field for
    /// each asynchronous one. `file` names it in errors.
    pub fn check(&self, file: &str) -> Result<(), DialectError> {
        if self.spawn.is_empty() {
            return Err(DialectError::NoSpawnTool { file: file.to_string() });
        }
        for (index, tool) in self.spawn.iter().enumerate() {
            if let Some(PromptWrap::Arguments { close, after: Some(_), .. }) = &tool.wrap
                && close.trim().is_empty()
            {
                return Err(DialectError::AfterWithoutClose { file: file.to_string(), index, tool: tool.name.clone() });
            }
            if tool.result == ResultMode::Async && tool.task_id_field.is_none() && tool.task_id_after.is_none() {
                return Err(DialectError::AsyncWithoutTaskId {
                    file: file.to_string(),
                    index,
                    tool: tool.name.clone(),
                });
            }
        }
        Ok(())
    }

    /// A built-in dialect by name, or a dialect file.
    pub fn load(name_or_path: &str) -> Result<Dialect, DialectError> {
        if let Some(dialect) = Dialect::builtin(name_or_path) {
            return Ok(dialect);
        }
        let path = Path::new(name_or_path);
        let text = std::fs::read_to_string(path).map_err(|source| DialectError::Unreadable {
            name_or_path: name_or_path.to_string(),
            builtins: &BUILTIN,
            source,
        })?;
        Dialect::from_json(&text, name_or_path)
    }

    /// The tool names a scenario may call without declaring them when this dialect's runtime
    /// answers (`drive`, `serve`, `record`): every tool it reads. The built-in core's tools are
    /// the runtime's own only under one of the core's dialects (`roku`, `bub`, `rehearsal`).
    pub fn vocabulary(&self) -> crate::scenario::Vocabulary {
        let names = self
            .spawn
            .iter()
            .map(|t| t.name.as_str())
            .chain(self.send.iter().map(|t| t.name.as_str()))
            .chain(self.wait.iter().map(String::as_str))
            .chain(self.cancel.iter().map(|t| t.name.as_str()))
            .chain(self.terminal.iter().map(|t| t.name.as_str()))
            .chain(self.root_only.iter().map(String::as_str))
            .chain(self.handoff.iter().map(String::as_str));
        let core = ["roku", "bub", "rehearsal"].iter().any(|n| Dialect::builtin(n).as_ref() == Some(self));
        crate::scenario::Vocabulary::runtime(names, core)
    }

    /// Whether a tool called `name` hands the conversation to another agent (`handoff`).
    pub fn is_handoff(&self, name: &str) -> bool {
        self.handoff.iter().any(|h| match h.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => h == name,
        })
    }

    /// The spawn tool called `name`.
    pub fn spawn_tool(&self, name: &str) -> Option<&SpawnTool> {
        self.spawn.iter().find(|t| t.name == name)
    }

    /// The send tool called `name`.
    pub fn send_tool(&self, name: &str) -> Option<&SendTool> {
        self.send.iter().find(|t| t.name == name)
    }

    /// The cancel tool called `name`, if it is one.
    pub fn cancel_tool(&self, name: &str) -> Option<&CancelTool> {
        self.cancel.iter().find(|t| t.name == name)
    }

    /// Whether a spawn call's result `text` says it made no child.
    pub fn is_refusal(&self, text: &str) -> bool {
        self.refusals.iter().any(|r| text.starts_with(r.as_str()))
    }

    /// The final text of a reply that ends a loop: the text argument of its first terminal
    /// call, or its own text when it has no calls; `None` when the reply does not end a loop.
    pub fn final_text(&self, reply: &crate::sut::llm::Message) -> Option<String> {
        if reply.tool_calls.is_empty() {
            return Some(match &self.empty_text {
                Some(text) if reply.content.is_empty() => text.clone(),
                _ => reply.content.clone(),
            });
        }
        reply.tool_calls.iter().find_map(|c| {
            let terminal = self.terminal.iter().find(|t| t.name == c.name)?;
            let text = c.args.get(&terminal.text).and_then(|v| v.as_str()).unwrap_or_default();
            Some(match &terminal.default {
                Some(default) if text.trim().is_empty() => default.clone(),
                _ => text.to_string(),
            })
        })
    }

    /// Whether `name` is one of the dialect's own sub-agent tools (a spawn, send or wait tool,
    /// or a tool named `<spawn tool>.<anything>`, as `subagent.cancel`): a child is never
    /// granted one by name (`bub.child.tools-at-most-parent`).
    pub fn is_family(&self, name: &str) -> bool {
        let n = normalized(name);
        let spawn = self.spawn.iter().map(|t| normalized(&t.name));
        let named = self.send.iter().map(|t| &t.name).chain(self.wait.iter()).map(|t| normalized(t));
        spawn.clone().any(|s| n == s || n.starts_with(&format!("{s}_"))) || named.into_iter().any(|s| n == s)
    }

    /// The notification `text` holds, if it is one (the first, when it holds several).
    pub fn notified<'a>(&self, text: &'a str) -> Option<Notified<'a>> {
        self.notifications(text).into_iter().next()
    }

    /// Every notification `text` holds, in order: none, one (a framed notification is the
    /// whole message), or several (tagged elements).
    pub fn notifications<'a>(&self, text: &'a str) -> Vec<Notified<'a>> {
        match &self.notification {
            None => Vec::new(),
            Some(Notification::Framed { open, middle, close_open, close }) => {
                framed([open, middle, close_open, close], text).into_iter().collect()
            }
            Some(Notification::Tagged { tagged }) => tagged.read(text),
        }
    }
}

impl SpawnTool {
    /// How a call of this tool with `args` hands its child's result back: `result`, unless
    /// the arguments hold every value of `sync_when` (then in the foreground, synchronously).
    pub fn result_of(&self, args: &serde_json::Value) -> ResultMode {
        let foreground =
            !self.sync_when.is_empty() && self.sync_when.iter().all(|(name, value)| args.get(name) == Some(value));
        if foreground { ResultMode::Sync } else { self.result }
    }

    /// Whether some call of this tool runs synchronously (its `result`, or `sync_when`).
    pub fn may_run_sync(&self) -> bool {
        self.result == ResultMode::Sync || !self.sync_when.is_empty()
    }

    /// The task id an asynchronous call's result `text` names: the `task_id_field` of a JSON
    /// result, else the word after `task_id_after`.
    pub fn task_id_in(&self, text: &str) -> Option<String> {
        if let Some(field) = &self.task_id_field
            && let Ok(value) = serde_json::from_str::<serde_json::Value>(text)
            && let Some(task) = value.get(field).and_then(|t| t.as_str())
        {
            return Some(task.to_string());
        }
        let after = self.task_id_after.as_ref()?;
        let (_, rest) = text.split_once(after.as_str())?;
        rest.split_whitespace().next().map(String::from)
    }

    /// The child's final reply as a foreground call's result `text` hands it back: the text
    /// itself, or what the `hand_back` frame holds (`None` when the text is not so framed).
    pub fn report_in(&self, text: &str) -> Option<String> {
        match &self.hand_back {
            None => Some(text.to_string()),
            Some(frame) => frame.report_in(text),
        }
    }

    /// The prompt a call of this tool gives its child, trimmed unless the tool is `untrimmed`
    /// (empty when absent): a string, or a list of message parts whose `text` parts are joined
    /// (as the wire reads a message's parts).
    pub fn prompt_of(&self, args: &serde_json::Value) -> String {
        let raw: String = match args.get(&self.prompt) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Array(parts)) => parts
                .iter()
                .filter(|p| p.get("type").and_then(|t| t.as_str()) == Some("text"))
                .filter_map(|p| p.get("text").and_then(|t| t.as_str()))
                .collect(),
            _ => String::new(),
        };
        if self.untrimmed { raw } else { raw.trim().to_string() }
    }

    /// The model a call of this tool names for its child, as the child's requests name it.
    pub fn model_of(&self, args: &serde_json::Value) -> Option<String> {
        let named = args.get(self.model.as_ref()?)?.as_str()?;
        Some(match named.split_once(':') {
            Some((_, id)) if self.model_provider => id.to_string(),
            _ => named.to_string(),
        })
    }

    /// The reasoning effort a call of this tool names for its child; `None` when it names none.
    pub fn effort_of(&self, args: &serde_json::Value) -> Option<String> {
        let named = args.get(self.reasoning_effort.as_ref()?)?.as_str()?.trim();
        (!named.is_empty()).then(|| named.to_string())
    }

    /// The tool names a call of this tool lists for its child (its `tools` argument: a list,
    /// or one comma-separated string), empty names dropped; `None` when it lists none.
    pub fn granted_names(&self, args: &serde_json::Value) -> Option<Vec<String>> {
        list_arg(args, self.tools.as_deref()?)
    }

    /// The skill names a call of this tool lists for its child (its `skills` argument), as
    /// [`SpawnTool::granted_names`] reads tools.
    pub fn granted_skills(&self, args: &serde_json::Value) -> Option<Vec<String>> {
        list_arg(args, self.skills.as_deref()?)
    }

    /// The profile a call of this tool names, trimmed; `None` when it names none.
    pub fn profile_of<'a>(&self, args: &'a serde_json::Value) -> Option<&'a str> {
        let name = args.get(self.profile.as_ref()?)?.as_str()?.trim();
        (!name.is_empty()).then_some(name)
    }

    /// Whether every tool a call of this tool grants its child was offered to the caller
    /// (names matched trimmed, without regard to case, `.` and `_` alike; the terminal tools
    /// `final_answer` and `fail` are every child's). The attribution also refuses the sub-agent
    /// tools themselves and reads a profile's list.
    pub fn grants_within(&self, args: &serde_json::Value, offered: &[String]) -> bool {
        self.granted_names(args).is_none_or(|names| names_within(&names, offered, |_| false, true))
    }
    /// Whether `text` is the first user message a call of this tool with `args` gives its
    /// child: the prompt (trimmed), as the tool's `wrap` writes it.
    pub fn opens(&self, args: &serde_json::Value, text: &str) -> bool {
        opens(self.wrap.as_ref(), &self.prompt_of(args), args, text)
    }

    /// Which conversation a call of this tool starts its child from.
    pub fn session_of(&self, args: &serde_json::Value) -> SessionKind {
        let Some(arg) = &self.session else { return SessionKind::Fresh };
        match args.get(arg).and_then(|s| s.as_str()).map(str::trim) {
            None | Some("") => SessionKind::Fresh,
            Some(v) if self.fork_values.iter().any(|f| f == v) => SessionKind::Fork,
            Some(v) if self.temp_values.iter().any(|t| t == v) => SessionKind::Fresh,
            Some(name) => SessionKind::Named(name.to_string()),
        }
    }
}

/// Whether `text` is a child's first user message for a call with `args` whose prompt is
/// `prompt` (trimmed), written as `wrap` says (absent: the prompt alone).
pub(crate) fn opens(wrap: Option<&PromptWrap>, prompt: &str, args: &serde_json::Value, text: &str) -> bool {
    match wrap {
        None => text == prompt,
        Some(PromptWrap::Template { text: template, suffix }) => {
            let head = template.replace("{prompt}", prompt);
            match suffix.as_ref().map(|s| s.for_call(args)) {
                None => text.trim() == head.trim(),
                Some(Ok(written)) => text.trim() == format!("{head}{written}").trim(),
                // A value not printed for sure: the text around it must be there, whatever
                // stands between.
                Some(Err((before, after))) => {
                    let (start, end) = (format!("{head}{before}"), after);
                    let text = text.trim();
                    text.len() >= start.trim_start().len() + end.trim_end().len()
                        && text.starts_with(start.trim_start())
                        && text.ends_with(end.trim_end())
                }
            }
        }
        Some(PromptWrap::Arguments { preamble, open, close, after }) => {
            let Some(rest) = text.trim().strip_prefix(preamble.trim()) else { return false };
            let Some(rest) = rest.trim_start().strip_prefix(open.trim()) else { return false };
            let equal = |json: &str| serde_json::from_str::<serde_json::Value>(json.trim()).is_ok_and(|w| &w == args);
            let close = close.trim();
            if close.is_empty() {
                return after.is_none() && equal(rest);
            }
            // The JSON ends where a `close` begins that leaves it equal to the arguments (a
            // string inside it may hold the same text), and what follows is `after`'s.
            rest.match_indices(close).any(|(at, _)| {
                let tail = rest[at + close.len()..].trim();
                let tail_fits = match after {
                    None => tail.is_empty(),
                    Some(after) => tail.starts_with(after.trim()),
                };
                tail_fits && equal(&rest[..at])
            })
        }
    }
}

/// Bub's name matching: trimmed, case-insensitive, `.` and `_` alike.
pub(crate) fn normalized(name: &str) -> String {
    name.trim().to_lowercase().replace('.', "_")
}

/// Whether every name of `names` is one of `available` (or, with `terminal`, a terminal tool
/// `final_answer` / `fail`), and none is `barred`; names matched as Bub matches them.
pub fn names_within(names: &[String], available: &[String], barred: impl Fn(&str) -> bool, terminal: bool) -> bool {
    names.iter().map(|n| normalized(n)).all(|n| {
        terminal && (n == "final_answer" || n == "fail") || !barred(&n) && available.iter().any(|o| normalized(o) == n)
    })
}

/// A list argument: a JSON array of strings, or one comma-separated string; empty names
/// dropped, `None` when none is left.
fn list_arg(args: &serde_json::Value, arg: &str) -> Option<Vec<String>> {
    let names: Vec<String> = match args.get(arg)? {
        serde_json::Value::Array(items) => items.iter().filter_map(|v| v.as_str()).map(String::from).collect(),
        serde_json::Value::String(s) => s.split(',').map(String::from).collect(),
        _ => return None,
    };
    let names: Vec<String> = names.into_iter().filter(|n| !n.trim().is_empty()).collect();
    (!names.is_empty()).then_some(names)
}

/// Which conversation a spawn call starts its child from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionKind {
    /// From nothing: the prompt is its first message.
    Fresh,
    /// From the parent's conversation as of the call.
    Fork,
    /// From what the named conversation recorded (nothing, the first time).
    Named(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// openai-agents 0.24's structured input: the preamble, a heading and a fenced JSON equal
    /// to the call's arguments, then its schema summary; a different JSON, a missing fence or
    /// a tail that is not the summary is not the child's message; `after` needs a `close`.
    #[test]
    fn an_arguments_wrap_reads_a_fenced_json_and_the_text_after_it() {
        let wrap = PromptWrap::Arguments {
            preamble: "Called as a tool.".into(),
            open: "## Structured Input Data:\n\n```".into(),
            close: "```".into(),
            after: Some("## Input Schema Summary:".into()),
        };
        let args = serde_json::json!({"text": "a ``` b", "n": 2});
        let message = |json: &str, tail: &str| {
            format!("Called as a tool.\n## Structured Input Data:\n\n```\n{json}\n```\n\n{tail}")
        };
        let json = "{\n  \"text\": \"a ``` b\",\n  \"n\": 2\n}";
        let summary = "## Input Schema Summary:\n- text (string, required)\n";
        assert!(opens(Some(&wrap), "", &args, &message(json, summary)), "a fence inside a string is not the close");
        assert!(!opens(Some(&wrap), "", &args, &message("{\"text\": \"a ``` b\", \"n\": 3}", summary)));
        assert!(!opens(Some(&wrap), "", &args, &message(json, "Something else")));
        assert!(!opens(Some(&wrap), "", &args, &format!("Called as a tool.\n{json}\n\n{summary}")));
        let plain = PromptWrap::arguments("Input:");
        assert!(opens(Some(&plain), "", &args, &format!("Input: {json}")));
        let mut d = Dialect::builtin("generic").unwrap();
        d.spawn[0].wrap = Some(PromptWrap::Arguments {
            preamble: "x".into(),
            open: String::new(),
            close: String::new(),
            after: Some("y".into()),
        });
        let err = d.check("d.json").unwrap_err();
        assert!(err.to_string().contains("wrap.arguments.after needs a `close`"), "{err}");
    }

    #[test]
    fn every_builtin_loads_and_round_trips_through_json() {
        for name in BUILTIN {
            let dialect = Dialect::builtin(name).unwrap();
            let text = serde_json::to_string_pretty(&dialect).unwrap();
            assert_eq!(Dialect::from_json(&text, "x.json").unwrap(), dialect, "{name}");
        }
    }

    #[test]
    fn a_bad_dialect_file_names_line_and_column() {
        let err = Dialect::from_json("{\n  \"name\": \"x\",\n  \"spawns\": []\n}", "my.json").unwrap_err();
        assert!(err.to_string().starts_with("my.json:3:"), "{err}");
        assert!(err.to_string().contains("spawns"), "{err}");
        let DialectError::NotADialect { file, line, column, .. } = &err else { panic!("{err:?}") };
        assert_eq!((file.as_str(), *line, *column), ("my.json", 3, 10), "{err}");
        assert!(std::error::Error::source(&err).is_some(), "{err}");
        let err = Dialect::from_json(r#"{"name":"x","spawn":[]}"#, "my.json").unwrap_err();
        assert!(err.to_string().contains("at least one"), "{err}");
        assert!(matches!(&err, DialectError::NoSpawnTool { file } if file == "my.json"), "{err:?}");
    }

    #[test]
    fn an_async_spawn_tool_without_a_task_id_field_is_named_by_its_place() {
        let mut dialect = Dialect::builtin("bub").unwrap();
        dialect.spawn[0].result = ResultMode::Async;
        dialect.spawn[0].task_id_field = None;
        let text = serde_json::to_string(&dialect).unwrap();
        let err = Dialect::from_json(&text, "a.json").unwrap_err();
        assert!(
            matches!(&err, DialectError::AsyncWithoutTaskId { file, index: 0, tool } if file == "a.json" && tool == "subagent"),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "a.json: spawn[0] (subagent) is async but has no `task_id_field` (or `task_id_after`): its results could not be told apart"
        );
    }

    #[test]
    fn a_dialect_neither_built_in_nor_readable_carries_the_name_and_the_io_error() {
        let err = Dialect::load("no/such/dialect.json").unwrap_err();
        let DialectError::Unreadable { name_or_path, builtins, source } = &err else { panic!("{err:?}") };
        assert_eq!(name_or_path, "no/such/dialect.json");
        assert_eq!(*builtins, &BUILTIN[..]);
        assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        assert!(err.to_string().starts_with("no/such/dialect.json: neither a built-in dialect (roku, bub,"), "{err}");
    }

    #[test]
    fn python_repr_prints_values_as_python_does_or_says_it_cannot() {
        use serde_json::json;
        for (value, printed) in [
            (json!({"code": "print('Paris')"}), r#"{'code': "print('Paris')"}"#),
            (json!({"a": "it's \"x\""}), r#"{'a': 'it\'s "x"'}"#),
            (
                json!({"t": true, "f": false, "n": null, "i": -3, "l": [1, "b\n\tc\\"]}),
                r#"{'t': True, 'f': False, 'n': None, 'i': -3, 'l': [1, 'b\n\tc\\']}"#,
            ),
            (json!({"city": "Lyon"}), "{'city': 'Lyon'}"),
            (json!({}), "{}"),
            (json!("\u{7}"), r"'\x07'"),
        ] {
            assert_eq!(python_repr(&value).as_deref(), Some(printed), "{value}");
        }
        // Floats and non-ASCII punctuation: Python's printing is not certain here, so nothing
        // is claimed.
        assert_eq!(python_repr(&json!({"x": 1.5})), None);
        assert_eq!(python_repr(&json!("a — b")), None);
        // Nor any non-ASCII character: Python escapes a letter its (older) Unicode tables do not
        // know (U+1C89, a letter in Rust's Unicode 16, unassigned in Python 3.12's 15.0).
        assert_eq!(python_repr(&json!({"é": "Zürich"})), None);
        assert_eq!(python_repr(&json!({"tje": "\u{1c89}"})), None);
    }

    #[test]
    fn a_template_suffix_is_written_exactly_when_the_call_gives_its_argument() {
        use serde_json::json;
        let text = r#"{"name": "s", "spawn": [{"name": "researcher", "prompt": "task", "result": "sync",
            "wrap": {"template": {"text": "Task:\n{prompt}\n---", "suffix": {"argument": "additional_args",
              "text": "\nArgs:\n{value}.", "print": "python"}}}}]}"#;
        let d = Dialect::from_json(text, "s.json").unwrap();
        let tool = &d.spawn[0];
        let plain = json!({"task": "Go."});
        let with = json!({"task": "Go.", "additional_args": {"city": "Lyon"}});
        assert!(tool.opens(&plain, "Task:\nGo.\n---"));
        assert!(tool.opens(&with, "Task:\nGo.\n---\nArgs:\n{'city': 'Lyon'}."));
        // Written only with the argument, and then only with its value.
        assert!(!tool.opens(&plain, "Task:\nGo.\n---\nArgs:\n{'city': 'Lyon'}."));
        assert!(!tool.opens(&with, "Task:\nGo.\n---"));
        assert!(!tool.opens(&with, "Task:\nGo.\n---\nArgs:\n{'city': 'Paris'}."));
        // Values Python reads as false write no suffix; a value not printed surely is matched by
        // the text around it, whatever Python printed between.
        for falsy in [json!(null), json!({}), json!([]), json!(""), json!(false), json!(0)] {
            assert!(tool.opens(&json!({"task": "Go.", "additional_args": falsy}), "Task:\nGo.\n---"), "{falsy}");
        }
        let float = json!({"task": "Go.", "additional_args": {"t": 0.5}});
        assert!(tool.opens(&float, "Task:\nGo.\n---\nArgs:\n{'t': 0.5}."));
        assert!(tool.opens(
            &json!({"task": "Go.", "additional_args": {"tje": "\u{1c89}"}}),
            "Task:\nGo.\n---\nArgs:\n{'tje': '\\u1c89'}."
        ));
        assert!(!tool.opens(&float, "Task:\nGo.\n---"), "the suffix's own text is still required");
        assert!(!tool.opens(&float, "Task:\nGone.\n---\nArgs:\n{'t': 0.5}."), "and the template's");
        // A template without a suffix is still written as a string, and reads back.
        let mut d = d;
        d.spawn[0].wrap = Some(PromptWrap::template("Task:\n{prompt}"));
        let json = serde_json::to_string(&d).unwrap();
        assert!(json.contains(r#""wrap":{"template":"Task:\n{prompt}"}"#), "{json}");
        assert_eq!(Dialect::from_json(&json, "s.json").unwrap(), d);
    }

    #[test]
    fn history_defaults_to_kept_reads_rendered_and_names_a_bad_field_by_line_and_column() {
        let d =
            Dialect::from_json(r#"{"name": "x", "spawn": [{"name": "a", "prompt": "p", "result": "sync"}]}"#, "x.json")
                .unwrap();
        assert_eq!(d.history, History::Kept);
        // The default is not written: every existing dialect serializes as before.
        assert!(!serde_json::to_string(&d).unwrap().contains("history"));
        let rendered = r#"{"name": "x", "spawn": [{"name": "a", "prompt": "p", "result": "sync"}],
  "history": {"rendered": {"calls": "Calling tools:", "arguments": "python"}}}"#;
        let d = Dialect::from_json(rendered, "x.json").unwrap();
        assert_eq!(d.history, History::Rendered { calls: "Calling tools:".into(), arguments: Some(Printed::Python) });
        assert_eq!(Dialect::from_json(&serde_json::to_string(&d).unwrap(), "x.json").unwrap(), d);
        let bad = r#"{"name": "x", "spawn": [{"name": "a", "prompt": "p", "result": "sync"}],
  "history": {"rendered": {"calls": "C", "argumentz": "python"}}}"#;
        let err = Dialect::from_json(bad, "x.json").unwrap_err();
        let DialectError::NotADialect { line, .. } = &err else { panic!("{err:?}") };
        assert_eq!(*line, 2, "{err}");
        assert!(err.to_string().starts_with("x.json:2:") && err.to_string().contains("argumentz"), "{err}");
        let err = Dialect::from_json(
            &bad.replace(r#"{"rendered": {"calls": "C", "argumentz": "python"}}"#, r#""retold""#),
            "x.json",
        )
        .unwrap_err();
        assert!(err.to_string().starts_with("x.json:2:") && err.to_string().contains("retold"), "{err}");
    }

    #[test]
    fn notifications_read_back() {
        let d = Dialect::builtin("bub").unwrap();
        let n = d.notified(
            "<subagent-notification task_id=\"sub-1\" status=\"completed\">\nhi\nthere\n</subagent-notification>",
        );
        assert_eq!(n, Some(Notified { task_id: "sub-1", status: "completed", body: "hi\nthere".into() }));
        assert_eq!(d.notified("plain"), None);
        // The framed form is read from its flat JSON, and a field it does not know is refused.
        let json = serde_json::to_string(&d.notification).unwrap();
        assert!(json.starts_with(r#"{"open":"<subagent-notification"#), "{json}");
        assert_eq!(serde_json::from_str::<Option<Notification>>(&json).unwrap(), d.notification);
        let extra = json.replacen('{', r#"{"status":"x","#, 1);
        assert!(serde_json::from_str::<Notification>(&extra).is_err(), "{extra}");
    }

    /// Claude Code 2.1.337's dialect, as examples/frameworks/claude-code holds it.
    fn claude_code() -> Dialect {
        Dialect::from_json(include_str!("../examples/frameworks/claude-code/dialect.json"), "dialect.json").unwrap()
    }

    /// Claude Code writes each background result as a `<task-notification>` element inside a
    /// `<system-reminder>`, and two results taken in together as two text blocks of one user
    /// message (joined on the wire): both are read, in order, each with its own body; a body
    /// holding the closing tag's text is read to the last one.
    #[test]
    fn tagged_notifications_are_read_anywhere_in_a_message_several_at_once() {
        let d = claude_code();
        let one = |id: &str, result: &str| {
            format!(
                "<system-reminder>\n[SYSTEM NOTIFICATION - NOT USER INPUT]\n\n<task-notification>\n<task-id>{id}</task-id>\n\
                 <tool-use-id>toolu_1</tool-use-id>\n<status>completed</status>\n<summary>Agent \"a\" finished</summary>\n\
                 <result>{result}</result>\n<usage><tool_uses>0</tool_uses></usage>\n</task-notification>\n</system-reminder>"
            )
        };
        let text = format!("{}{}", one("a1", "42"), one("b2", "two\nlines </result> inside"));
        let got = d.notifications(&text);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0], Notified { task_id: "a1", status: "completed", body: "42".into() });
        assert_eq!(got[1], Notified { task_id: "b2", status: "completed", body: "two\nlines </result> inside".into() });
        assert_eq!(d.notified(&text), Some(got[0].clone()));
        assert!(d.notifications("<task-notification> with no fields </task-notification>").is_empty());
        assert!(d.notifications("no notification").is_empty());
        // Claude Code escapes `<`, `>` and `&` in a result (blind review of issue 40): read back.
        let escaped = one("c3", "a &lt; b &amp;&amp; c &gt; d; &amp;lt; stays &amp;lt; and a bare & too");
        assert_eq!(d.notifications(&escaped)[0].body, "a < b && c > d; &lt; stays &lt; and a bare & too");
    }

    /// `sync_when`: Claude Code's `Agent` runs in the background unless the call says
    /// `"run_in_background": false`; any other value, or none, keeps the tool's mode.
    #[test]
    fn sync_when_runs_a_call_in_the_foreground_by_its_arguments() {
        let d = claude_code();
        let agent = d.spawn_tool("Agent").unwrap();
        let mode = |args: serde_json::Value| agent.result_of(&args);
        assert_eq!(mode(serde_json::json!({"prompt": "x"})), ResultMode::Async);
        assert_eq!(mode(serde_json::json!({"prompt": "x", "run_in_background": true})), ResultMode::Async);
        assert_eq!(mode(serde_json::json!({"prompt": "x", "run_in_background": false})), ResultMode::Sync);
        assert_eq!(mode(serde_json::json!({"prompt": "x", "run_in_background": "false"})), ResultMode::Async);
        assert!(agent.may_run_sync());
        assert!(!bub_subagent().may_run_sync());
    }

    /// `task_id_after`: the id is the word after the text in a plain-text result; a JSON
    /// field still reads as before.
    #[test]
    fn a_task_id_is_read_after_a_text_or_from_a_json_field() {
        let d = claude_code();
        let agent = d.spawn_tool("Agent").unwrap();
        let launched = "Async agent launched successfully. (internal metadata)\nagentId: adbabeca6890a5376 (internal ID - do not mention to user.)\nThe agent is working in the background.";
        assert_eq!(agent.task_id_in(launched).as_deref(), Some("adbabeca6890a5376"));
        assert_eq!(agent.task_id_in("no id here"), None);
        assert_eq!(bub_subagent().task_id_in(r#"{"task_id": "sub-1"}"#).as_deref(), Some("sub-1"));
        assert_eq!(bub_subagent().task_id_in("agentId: x"), None);
    }

    /// `hand_back`: a foreground result is the frame, the reply indented line by line (an
    /// empty line may lose its indent), then the `agentId:` line; anything else is not framed.
    #[test]
    fn a_hand_back_frame_gives_the_reply_without_its_indent() {
        let d = claude_code();
        let agent = d.spawn_tool("Agent").unwrap();
        let frame = &agent.hand_back.as_ref().unwrap().before;
        let result = format!(
            "{frame}  Line one.\n\n  Line three.\nagentId: aca5 (use SendMessage)\n<usage>subagent_tokens: 12</usage>"
        );
        assert_eq!(agent.report_in(&result).as_deref(), Some("Line one.\n\nLine three."));
        assert_eq!(agent.report_in("Line one."), None);
        let listed = format!("  <tools-used-before-summary>Agent</tools-used-before-summary>\n  \n{result}");
        assert_eq!(agent.report_in(&listed).as_deref(), Some("Line one.\n\nLine three."), "the tools listed first");
        assert_eq!(agent.report_in(&format!("{frame}not indented\nagentId: a")), None);
        assert_eq!(roku_agent().report_in("as is").as_deref(), Some("as is"));
    }

    /// An asynchronous tool needs a way to read its task id: a JSON field or a text before it.
    #[test]
    fn an_async_spawn_tool_may_name_its_task_id_by_a_text_instead() {
        let mut d = claude_code();
        assert!(d.check("a.json").is_ok());
        d.spawn[0].task_id_after = None;
        let err = d.check("a.json").unwrap_err().to_string();
        assert!(err.contains("has no `task_id_field` (or `task_id_after`)"), "{err}");
    }
}

#[cfg(test)]
mod vocabulary_tests {
    use super::*;
    use crate::scenario::Vocabulary;
    use std::path::Path;

    fn parse(json: &str, vocabulary: &Vocabulary) -> Result<crate::scenario::Scenario, String> {
        crate::scenario::parse_with(Path::new("s.json"), json, vocabulary).map_err(|e| e.to_string())
    }

    fn script(tools: &str, calls: &str) -> String {
        format!(
            r#"{{"name": "s", "tools": [{tools}], "lanes": [{{"agent": "main", "replies": [{{"calls": [{calls}]}}, {{"text": "done"}}]}}],
               "turns": [{{"user": "go"}}]}}"#
        )
    }

    /// A framework's dialect: its spawn tool `delegate`, its handoffs `transfer_to_*`, and its
    /// own `final_answer` (argument `answer`, not the core's).
    fn framework() -> Dialect {
        let mut d = Dialect::builtin("generic").unwrap();
        d.spawn[0].name = "delegate".into();
        d.handoff = vec!["transfer_to_*".into()];
        d.terminal =
            vec![crate::dialect::TerminalTool { name: "final_answer".into(), text: "answer".into(), default: None }];
        d
    }

    #[test]
    fn a_runtimes_own_tools_are_called_without_declaring_them() {
        let v = framework().vocabulary();
        let calls = r#"{"tool": "delegate", "args": {"prompt": "p"}}, {"tool": "transfer_to_billing", "args": {}},
                       {"tool": "final_answer", "args": {"answer": "a"}}"#;
        parse(&script("", calls), &v).unwrap();
        // In process none of them is a tool, and the core's `final_answer` takes no `answer`.
        let err = parse(&script("", calls), &Vocabulary::core()).unwrap_err();
        assert!(err.contains("the script calls `delegate`, which is not a declared tool"), "{err}");
        // Declaring one the dialect reads is refused where it is written.
        let err = parse(&script(r#"{"name": "delegate"}"#, ""), &v).unwrap_err();
        assert!(err.contains("tools[0].name") && err.contains("a tool the runtime's dialect reads"), "{err}");
    }

    #[test]
    fn a_core_name_is_reserved_only_where_the_runtime_has_it() {
        // smolagents has a `final_answer` of its own; a runtime whose dialect does not read
        // `fail` may declare a tool of that name, and its call is the declared tool's.
        let generic = Dialect::builtin("generic").unwrap().vocabulary();
        let declared = script(r#"{"name": "fail"}"#, r#"{"tool": "fail", "args": {"why": 3}}"#);
        parse(&declared, &generic).unwrap();
        let err = parse(&declared, &Vocabulary::core()).unwrap_err();
        assert!(err.contains("`fail` is a built-in tool of the core"), "{err}");
        let err = parse(&declared, &Dialect::builtin("bub").unwrap().vocabulary()).unwrap_err();
        assert!(err.contains("tools[0].name") && err.contains("call it without declaring it"), "under bub's: {err}");
        // Under the core's dialects a core tool's call is still checked against its schema.
        let bad = script("", r#"{"tool": "subagent", "args": {"promt": "p"}}"#);
        assert!(parse(&bad, &Dialect::builtin("bub").unwrap().vocabulary()).is_err());
    }
}

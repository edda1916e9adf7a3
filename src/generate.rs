//! Proptest strategies that produce valid scenarios across both rule sets, for the property
//! tests and `rehearsal fuzz`.
//!
//! A strategy draws a [`Plan`] (rule knobs, the root's replies, each child's script, turns,
//! steering) and compiles it into an ordinary [`Scenario`], the same value a user writes, so
//! a finding serialises to a scenario file. Plans shrink the proptest way: fewer replies,
//! fewer calls, smaller numbers, simpler children.
//!
//! The draws sit around the edges of the rules: budgets from 1 to 40 and grants around the
//! child cap, depth limits 0 to 2, spawns past the limit, caps 1 to 8, latencies on and next
//! to each timeout, results one character either side of the truncation limit in ASCII,
//! accented, CJK and emoji text, temp / fork / named sessions, wait / send / cancel, steering,
//! several turns and LLM errors, child grants (`allowed_tools` empty, narrowed, spelled in every
//! way the name matching accepts, or naming a tool nobody has) and, one plan in eight, Roku's
//! risk gate with tags, a policy list (now and then naming a call that is safe all the same)
//! and the user's answers; in half of those the user, not the policy, decides on spawns, so
//! children run under the root's gate, and one foreground child asks questions of its own.
//! The scenario's profile is drawn too (a body plain, padded or blank, tools and skills that narrow
//! the child, a model, a reasoning effort, a time limit of its own, 0 or none; declared inline, or
//! one time in three written as a profile file, with or without its `name`, its name `helper` or
//! `code.helper` (a dot before `.md`), its lists as YAML lists or as comma-separated strings, its
//! lines ended with `\n` or `\r\n`), and so are a spawn's own model, reasoning effort and
//! `allowed_skills`, a profile name padded or missing, a blank prompt and bad names out of order.
//! Special values are drawn on purpose: 0 where 0 means "none" (a time limit from the knobs or a
//! call, a recovery budget, a spawn cost, a grant), `null` for an optional limit, a time limit of
//! exactly one second (`1 seconds`), a negative (invalid) or huge (clamped) time limit on a spawn,
//! a negative one on a wait, a wait without one (the default), a reply of whitespace only, a
//! `final_answer` or `fail` without its text, with whitespace around it or with text of the reply's
//! own beside it, an `Agent` task, a `subagent.send` message or a task id padded with whitespace, a
//! custom unknown-tool message (its `{name}` once or twice), and each knob left unset one time in
//! four, so the presets' own values run too. Same-instant ties are drawn on purpose too: latencies
//! lean to the values of the time limits, so children end together, on a limit, on a wait's
//! deadline or on a steering time, in every explored order the fuzzer then tries. Generated scripts
//! never leave a run waiting forever without a time limit inside the run's horizon (a child only
//! hangs when one applies to it), so a run that hits its horizon is a real termination finding.
//! One plan in six opens its first turn with a [`Rare`] situation the free draws reach only
//! once in thousands of cases (a queued task cancelled while another waits, a `send` that would
//! continue a named session another task is using, a foreground child's reply in the very
//! instant of its time limit), setting the knobs it needs. When the fuzzer judges from the
//! model's side ([`Mode::ModelSide`]), about two plans in five of those without a rare
//! situation open with a [`Shape`] that makes a model-side rule visible (issue 38): the step
//! budget run out by a regular call with recovery left (the nudge shown in a second turn), and
//! recovery run out first with steps left; a
//! terminal call before or after a `Read`, a `Flaky`, an unknown name, an `Agent` or a
//! `subagent` call of the same reply; a background child's last reply at exactly its time limit
//! (from the call or the default knob); a `risk:safe` tool on the policy's deny list; `fork`
//! and `inherit` spawns beside other calls of their reply; a child that ends early (answer,
//! `fail`, time limit) while the parent then spends exactly what it has left, so a refund would
//! show as one request more; and two children under a limit of 1.5 s (`Agent`'s knob, a call's
//! `timeout_seconds`, the default knob) replying just before and just after it. The shape is
//! drawn after the plan, so judged from events ([`Mode::Events`], the default) every case is
//! drawn byte for byte as before the shapes existed. What the generator cannot know in
//! advance it does not bet on: a `subagent` call on a named session an earlier call used may find
//! it in use, so it is not counted among the tasks a `$taskN` may name, and a continued task that
//! never asked the model (cancelled while queued) finds a lane for the `send`'s message.
//! This module generates; it judges nothing.

mod compile;
mod draw;
mod plan;

pub use draw::{plan_in, scenario, scenario_for, scenario_in};
pub use plan::{Family, Mode, Plan, Rare, Shape};

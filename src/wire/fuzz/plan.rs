//! What a generated case for a runtime in another process is made of ([`Case`]), and how one
//! is drawn ([`Case::draw`]) within what the runtime's description says it can do ([`Reach`]):
//! its dialect's spawn, send, wait, cancel and terminal tools, whether a spawn's result comes
//! at once or later, its session modes and time limits, the limits it lets a scenario set,
//! and whether it keeps a conversation across turns.
//!
//! The draws sit next to the limits: results one character either side of the result limit
//! (in 1- to 4-byte characters), child replies just before, on and after a time limit (on
//! virtual time only: off the clock a latency costs real time, so latencies stay small and no
//! time limit is drawn), more children in one reply than the concurrency cap, step budgets
//! that a spawn and its grant use up, a child that calls a spawn tool (refused at the depth
//! limit), model errors, hangs where a time limit applies, forked and named sessions, waits,
//! sends and cancels of earlier tasks, one or two turns.
//!
//! Case `n` of seed `s` is drawn from SplitMix64 over `s` and `n` alone: the same case whatever
//! ran before it. This module draws; it neither writes scenarios (`compile`) nor shrinks them
//! (`shrink`).

use crate::dialect::{CancelTool, Dialect, ResultMode, SendTool, SpawnTool, TerminalTool};
use crate::seed::{GAMMA, splitmix64};
use crate::wire::runtime::RuntimeDescription;

/// Units of a result: 1, 2, 3 and 4 bytes per character.
pub(super) const UNITS: [&str; 4] = ["a", "é", "字", "😀"];

/// Child latencies on virtual time (ms): on and either side of the time limits drawn (1 s, 2 s).
const CLOCK_LATENCIES: [u64; 11] = [0, 100, 500, 999, 1000, 1001, 1500, 1999, 2000, 2001, 3000];

/// Child latencies on real time (ms): small, as each costs its wall time.
const WALL_LATENCIES: [u64; 4] = [0, 10, 30, 60];

/// Values drawn for each limit a scenario may set, by the limit's name: the edges the rules
/// turn on (a cap of 1, a budget that one spawn and its grant use up, a result limit a short
/// answer passes).
pub(super) fn limit_values(name: &str) -> &'static [u64] {
    match name {
        "max_concurrency" => &[1, 2, 3],
        "result_limit_chars" => &[8, 12, 20],
        "root_step_budget" => &[6, 11, 12, 13, 24],
        "depth_limit" => &[1, 2],
        "subagent_default_timeout_ms" => &[1000, 2000],
        "subagent_default_timeout_seconds" => &[1, 2],
        // A request limit (`limits.request_limits`): a few requests.
        _ => &[1, 2, 3, 5],
    }
}

/// What a runtime can be asked to do, read from its description.
#[derive(Clone, Debug)]
pub struct Reach {
    /// The runtime's name, for the cases' names.
    pub name: String,
    /// The spawn tools its root is offered.
    pub spawns: Vec<SpawnTool>,
    /// The tool that hands a message to a task, if any.
    pub send: Option<SendTool>,
    /// The tool that cancels a task, if any.
    pub cancel: Option<CancelTool>,
    /// The tool that waits for results (`task_ids`, `timeout_seconds`, as the built-in core's
    /// `subagent.wait` takes them), if any.
    pub wait: Option<String>,
    /// A tool that ends a loop, if any.
    pub terminal: Option<TerminalTool>,
    /// The limits a scenario may set (`runtime_limits`), in name order.
    pub settable: Vec<String>,
    /// The result limit the runtime is judged with, if it states one (a drawn one wins).
    pub result_limit: Option<usize>,
    /// Whether the runtime keeps a conversation across turns.
    pub turns: bool,
    /// Whether the case runs on virtual time (`--clock`): time limits and long latencies cost
    /// nothing.
    pub clock: bool,
    /// The root's step budget when a case may set it (`settable.root_step_budget`): the value
    /// the runtime is judged with, and what one spawn takes of it (its cost and the grant the
    /// preset gives a child), so that shrinking can drop a spawn and the steps it took together.
    pub budget: Option<(u64, u64)>,
}

impl Reach {
    /// What `description` says its runtime can do; `clock`: whether cases run on virtual time.
    pub fn of(description: &RuntimeDescription, clock: bool) -> Reach {
        let dialect: Dialect = description.dialect();
        let tools = &description.features.tools;
        let offered = |name: &str| tools.is_empty() || tools.iter().any(|t| t == name);
        let spawns: Vec<SpawnTool> = dialect.spawn.iter().filter(|s| offered(&s.name)).cloned().collect();
        let asynchronous = spawns.iter().any(|s| s.result == ResultMode::Async);
        Reach {
            name: description.name.clone(),
            send: dialect.send.first().filter(|s| asynchronous && offered(&s.name)).cloned(),
            cancel: dialect.cancel.first().filter(|c| asynchronous && offered(&c.name)).cloned(),
            wait: dialect.wait.clone().filter(|w| asynchronous && offered(w)),
            terminal: dialect.terminal.iter().find(|t| offered(&t.name)).cloned(),
            settable: description.settable.keys().cloned().collect(),
            result_limit: description.limits.result_limit_chars.flatten(),
            turns: description.features.turns,
            clock,
            budget: description
                .settable
                .contains_key("root_step_budget")
                .then_some(description.limits.root_step_budget)
                .flatten()
                .map(|stated| {
                    let rules = match description.preset {
                        crate::scenario::PresetName::Roku => crate::rules::Rules::roku(),
                        crate::scenario::PresetName::Bub => crate::rules::Rules::bub(),
                    };
                    (u64::from(stated), u64::from(rules.spawn_cost) + u64::from(rules.child_step_cap))
                }),
            spawns,
        }
    }

    /// Whether a spawn tool's result comes later (a task id at once).
    fn asynchronous(&self, tool: usize) -> bool {
        self.spawns.get(tool).is_some_and(|s| s.result == ResultMode::Async)
    }
}

/// One generated case: the limits set, the turns, and every child's script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    /// `runtime_limits`: the limits set for this case, in name order.
    pub limits: Vec<(String, u64)>,
    /// The user turns, each with the root's replies.
    pub turns: Vec<Turn>,
    /// Each child's script, by the child's number (`[job {n+1}]` in its prompt).
    pub children: Vec<Child>,
}

/// One user turn: the root's replies in order; the last answers every request left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Turn {
    /// The root's replies.
    pub replies: Vec<RootReply>,
}

/// A reply of the root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RootReply {
    /// Tool calls, after `latency` ms.
    Calls {
        /// The calls, in order.
        calls: Vec<Call>,
        /// ms.
        latency: u64,
    },
    /// The final answer: as text, or through the terminal tool.
    Final {
        /// Through the terminal tool.
        terminal: bool,
        /// ms.
        latency: u64,
    },
    /// The model call fails with this HTTP status.
    Error {
        /// 400 to 599.
        status: u16,
    },
}

/// A call of a root reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    /// Starts child `child` with spawn tool `tool`.
    Spawn {
        /// Index into [`Reach::spawns`].
        tool: usize,
        /// The child's number.
        child: usize,
        /// Its session.
        session: Session,
        /// Its time limit in seconds, if the call gives one.
        timeout: Option<u32>,
    },
    /// Waits for tasks (`$taskN`, from 1).
    Wait {
        /// The tasks.
        tasks: Vec<u32>,
    },
    /// Hands a message to task `$task{task}`, which child `child`'s lane answers.
    Send {
        /// The task.
        task: u32,
        /// The child the task is.
        child: usize,
    },
    /// Cancels task `$task{task}`.
    Cancel {
        /// The task.
        task: u32,
    },
    /// A tool nobody has.
    Unknown,
}

/// A spawn's session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Session {
    /// The argument left out.
    Default,
    /// The `n`-th of the tool's values that start from nothing.
    Temp(usize),
    /// The `n`-th of its values that start from the parent's conversation.
    Fork(usize),
    /// A named session (`s{n}`).
    Named(u8),
}

/// A child's script: its replies in order; the last answers every request left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Child {
    /// The replies.
    pub replies: Vec<ChildReply>,
}

/// A reply of a child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChildReply {
    /// Answers with text: a short one, or `limit + around` copies of `UNITS[unit]`.
    Answer {
        /// The unit.
        unit: usize,
        /// Relative to the result limit (-1, 0, 1), or `None` for a short answer.
        around: Option<i8>,
        /// ms.
        latency: u64,
    },
    /// Calls the first spawn tool (a grandchild, refused at the depth limit).
    Spawn,
    /// Calls a tool nobody has, `count` times in one reply (each a regular call that costs a
    /// step: as many as a child's grant spend it in one reply).
    Unknown {
        /// How many calls.
        count: u8,
    },
    /// The model call fails with this HTTP status.
    Error {
        /// 400 to 599.
        status: u16,
        /// ms.
        latency: u64,
    },
    /// Never answers (only where a time limit applies).
    Hang,
}

/// Draws from SplitMix64 over a case's own seed.
struct Draw(u64);

impl Draw {
    fn new(seed: u64, case: u64) -> Draw {
        Draw(splitmix64(seed ^ splitmix64(case.wrapping_mul(GAMMA))))
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GAMMA);
        splitmix64(self.0)
    }

    /// A number below `n` (`n` > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// True one time in `n`.
    fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }

    /// An index drawn by weight.
    fn weighted(&mut self, weights: &[u64]) -> usize {
        let mut at = self.below(weights.iter().sum());
        for (i, w) in weights.iter().enumerate() {
            if at < *w {
                return i;
            }
            at -= w;
        }
        weights.len() - 1
    }
}

impl Case {
    /// Case `case` of seed `seed` for a runtime that can do `reach`.
    pub fn draw(reach: &Reach, seed: u64, case: u64) -> Case {
        let mut d = Draw::new(seed, case);
        let mut out = Case { limits: Vec::new(), turns: Vec::new(), children: Vec::new() };
        for name in &reach.settable {
            if d.one_in(2) {
                out.limits.push((name.clone(), d.pick(limit_values(name))));
            }
        }
        let turns = if reach.turns && d.one_in(4) { 2 } else { 1 };
        // Tasks started so far, across turns: what a `$taskN` may name.
        let mut tasks: Vec<usize> = Vec::new();
        for t in 0..turns {
            let mut replies = Vec::new();
            let with_calls = if reach.spawns.is_empty() { 0 } else { d.weighted(&[1, 6, 3]) };
            for r in 0..with_calls {
                if d.one_in(16) {
                    replies.push(RootReply::Error { status: d.pick(&[429, 500, 503]) });
                    continue;
                }
                let calls = out.draw_calls(reach, &mut d, &mut tasks, r > 0 || t > 0);
                let latency = if d.one_in(3) { out.root_latency(reach, &mut d) } else { 0 };
                replies.push(RootReply::Calls { calls, latency });
            }
            let terminal = reach.terminal.is_some() && d.one_in(4);
            let latency = if d.one_in(4) { out.root_latency(reach, &mut d) } else { 0 };
            replies.push(RootReply::Final { terminal, latency });
            out.turns.push(Turn { replies });
        }
        out
    }

    fn root_latency(&self, reach: &Reach, d: &mut Draw) -> u64 {
        if reach.clock { d.pick(&[500, 1500, 2500]) } else { d.pick(&[20, 80]) }
    }

    /// The calls of one root reply; `later`: an earlier reply made calls (tasks may exist).
    fn draw_calls(&mut self, reach: &Reach, d: &mut Draw, tasks: &mut Vec<usize>, later: bool) -> Vec<Call> {
        let mut calls = Vec::new();
        let spawns = if later && !tasks.is_empty() && d.one_in(2) { 0 } else { 1 + d.weighted(&[5, 6, 4, 3, 2]) };
        for _ in 0..spawns {
            let tool = d.below(reach.spawns.len() as u64) as usize;
            let spec = &reach.spawns[tool];
            let session = match &spec.session {
                Some(_) => match d.weighted(&[9, 3, 5, 4]) {
                    1 if !spec.temp_values.is_empty() => Session::Temp(d.below(spec.temp_values.len() as u64) as usize),
                    2 if !spec.fork_values.is_empty() => Session::Fork(d.below(spec.fork_values.len() as u64) as usize),
                    // Mostly one name: two calls on it in one reply are where a session in
                    // use shows (`bub.session.named-one-at-a-time`).
                    3 => Session::Named(if d.one_in(4) { 2 } else { 1 }),
                    _ => Session::Default,
                },
                None => Session::Default,
            };
            // 0 is no limit, and lifts a default one (`bub.timeout.zero-is-none`).
            let timeout = (reach.clock && spec.timeout_seconds.is_some() && d.one_in(3)).then(|| d.pick(&[0, 1, 1, 2]));
            let limited = timeout.map_or(self.default_timeout(), |t| t > 0);
            let child = self.children.len();
            self.children.push(self.draw_child(reach, d, limited));
            if reach.asynchronous(tool) {
                tasks.push(child);
            }
            calls.push(Call::Spawn { tool, child, session, timeout });
        }
        if !tasks.is_empty() && (spawns == 0 || d.one_in(4)) {
            let task = d.below(tasks.len() as u64) as u32 + 1;
            match d.below(3) {
                0 if reach.wait.is_some() => {
                    let mut waited = vec![task];
                    if tasks.len() > 1 && d.one_in(2) {
                        let other = d.below(tasks.len() as u64) as u32 + 1;
                        if other != task {
                            waited.push(other);
                        }
                    }
                    calls.push(Call::Wait { tasks: waited });
                }
                1 if reach.send.is_some() => calls.push(Call::Send { task, child: tasks[task as usize - 1] }),
                2 if reach.cancel.is_some() => calls.push(Call::Cancel { task }),
                _ => {}
            }
        }
        if d.one_in(10) {
            calls.push(Call::Unknown);
        }
        calls
    }

    /// A child's script; `limited`: a time limit applies to it, so it may hang.
    fn draw_child(&self, reach: &Reach, d: &mut Draw, limited: bool) -> Child {
        let mut replies = Vec::new();
        let latency = |d: &mut Draw| if reach.clock { d.pick(&CLOCK_LATENCIES) } else { d.pick(&WALL_LATENCIES) };
        let first = d.weighted(&[14, 2, 2, 2, if limited { 3 } else { 0 }]);
        match first {
            1 => replies.push(ChildReply::Spawn),
            2 => replies.push(ChildReply::Unknown { count: d.pick(&[1, 2, 10, 11]) }),
            3 => {
                replies.push(ChildReply::Error { status: d.pick(&[400, 500]), latency: latency(d) });
                return Child { replies };
            }
            4 => {
                replies.push(ChildReply::Hang);
                return Child { replies };
            }
            _ => {}
        }
        let around = self.result_limit(reach).is_some() && d.weighted(&[1, 2]) == 1;
        replies.push(ChildReply::Answer {
            unit: d.below(UNITS.len() as u64) as usize,
            around: around.then(|| d.pick(&[-1i8, 0, 1])),
            latency: latency(d),
        });
        Child { replies }
    }

    /// Whether this case sets a default time limit for children.
    pub fn default_timeout(&self) -> bool {
        self.limits.iter().any(|(name, v)| name.starts_with("subagent_default_timeout") && *v > 0)
    }

    /// The result limit this case runs with: its own `result_limit_chars`, else the runtime's.
    pub fn result_limit(&self, reach: &Reach) -> Option<usize> {
        self.limits
            .iter()
            .find(|(name, _)| name == "result_limit_chars")
            .map(|(_, v)| *v as usize)
            .or(reach.result_limit)
    }

    /// How many replies the scenario of this case scripts (root and children).
    pub fn replies(&self) -> usize {
        let root: usize = self.turns.iter().map(|t| t.replies.len()).sum();
        root + self.spawned().map(|c| self.children[c].replies.len()).sum::<usize>()
    }

    /// The children some spawn call starts, in call order.
    pub fn spawned(&self) -> impl Iterator<Item = usize> + '_ {
        self.turns
            .iter()
            .flat_map(|t| &t.replies)
            .flat_map(|r| match r {
                RootReply::Calls { calls, .. } => calls.as_slice(),
                _ => &[],
            })
            .filter_map(|c| match c {
                Call::Spawn { child, .. } => Some(*child),
                _ => None,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn py_runtime() -> Reach {
        Reach::of(&RuntimeDescription::builtin("py-runtime").unwrap(), true)
    }

    #[test]
    fn a_case_is_the_same_for_its_seed_and_number_alone() {
        let reach = py_runtime();
        assert_eq!(Case::draw(&reach, 1, 7), Case::draw(&reach, 1, 7));
        let differ = (0..20).filter(|n| Case::draw(&reach, 1, *n) != Case::draw(&reach, 2, *n)).count();
        assert!(differ > 15, "{differ}");
    }

    #[test]
    fn the_reach_of_py_runtime_is_its_dialects_async_family() {
        let reach = py_runtime();
        assert_eq!(reach.spawns.len(), 1);
        assert_eq!(reach.spawns[0].name, "subagent");
        assert_eq!(reach.wait.as_deref(), Some("subagent.wait"));
        assert!(reach.send.is_some() && reach.cancel.is_some() && reach.terminal.is_some());
        let settable = ["depth_limit", "max_concurrency", "result_limit_chars", "root_step_budget"];
        assert_eq!(reach.settable[..4], settable);
        assert_eq!(reach.settable[4], "subagent_default_timeout_seconds");
    }

    #[test]
    fn only_a_time_limited_child_hangs_and_off_the_clock_none_is() {
        let reach = py_runtime();
        let wall = Reach { clock: false, ..reach.clone() };
        for n in 0..400 {
            for (r, case) in [(&reach, Case::draw(&reach, 3, n)), (&wall, Case::draw(&wall, 3, n))] {
                for turn in &case.turns {
                    for reply in &turn.replies {
                        let RootReply::Calls { calls, .. } = reply else { continue };
                        for call in calls {
                            if let Call::Spawn { child, timeout, .. } = call {
                                let hangs = case.children[*child].replies.contains(&ChildReply::Hang);
                                let limited = timeout.map_or(case.default_timeout(), |t| t > 0);
                                assert!(!hangs || limited, "case {n}");
                                assert!(r.clock || timeout.is_none(), "case {n}");
                            }
                        }
                    }
                }
            }
        }
    }
}

//! Robustness: every scenario under `scenarios/` (and every profile file beside one), mutated
//! the way careless or hostile users do (a flipped byte, a cut-off file, a field deleted or
//! written twice, a number at an extreme, a huge repeat count, a value of the wrong type), run
//! through the same entry point as the command line. The outcome is always a verdict or a
//! clear error: exit 0, 1 or 2, never a panic and never an internal error (exit 3).
//!
//! 256 cases by default; `PROPTEST_CASES=5000 cargo test --test suite robustness` for more.
//! A failing case is shrunk to a small mutation and printed with the mutated text.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use clap::Parser;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use serde_json::Value;

use rehearsal::cli::{self, Cli, Exit};

/// The files a case may mutate, relative to `scenarios/`: every scenario and profile file.
fn targets() -> &'static [PathBuf] {
    static TARGETS: OnceLock<Vec<PathBuf>> = OnceLock::new();
    TARGETS.get_or_init(|| {
        let root = crate::support::manifest_path("scenarios");
        let mut files = Vec::new();
        let mut folders = vec![root.clone()];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    folders.push(path);
                } else if path.extension().is_some_and(|e| e == "json" || e == "md") {
                    files.push(path.strip_prefix(&root).unwrap().to_path_buf());
                }
            }
        }
        files.sort();
        files
    })
}

/// Numbers where bugs live: zero, negatives, the edges of the integer types, floats past
/// them, and the tiny and the huge.
const EXTREMES: &[&str] = &[
    "0",
    "-1",
    "0.5",
    "1e-300",
    "1e19",
    "1e300",
    "-1e300",
    "2147483648",
    "4294967296",
    "9007199254740993",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775809",
    "340282366920938463463374607431768211456",
];

/// Values of the wrong type for any field.
const WRONG_TYPES: &[&str] = &["null", "true", "\"x\"", "[]", "{}", "[null]", "{\"repeat\": \"ab\", \"count\": 3}"];

/// One change to one file.
#[derive(Clone, Debug)]
enum Mutation {
    /// Flip one bit of one byte.
    FlipBit { at: usize, bit: u8 },
    /// Cut the file off.
    Truncate { at: usize },
    /// Remove an object member (the n-th, counting every member of every object).
    Delete { nth: usize },
    /// Write an object member twice.
    Duplicate { nth: usize },
    /// Replace a number with an extreme.
    Extreme { nth: usize, value: usize },
    /// Replace a string with a huge repeated text.
    HugeRepeat { nth: usize, count: u64 },
    /// Replace any value with one of another type.
    WrongType { nth: usize, value: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Mutation::FlipBit { at, bit }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        any::<usize>().prop_map(|nth| Mutation::Delete { nth }),
        any::<usize>().prop_map(|nth| Mutation::Duplicate { nth }),
        (any::<usize>(), 0..EXTREMES.len()).prop_map(|(nth, value)| Mutation::Extreme { nth, value }),
        (any::<usize>(), prop_oneof![Just(1_000_001u64), Just(u64::MAX), Just(10_000_000_000)])
            .prop_map(|(nth, count)| Mutation::HugeRepeat { nth, count }),
        (any::<usize>(), 0..WRONG_TYPES.len()).prop_map(|(nth, value)| Mutation::WrongType { nth, value }),
    ]
}

/// Where a structural mutation applies while the JSON is written back out.
#[derive(Clone, Copy)]
enum Target {
    /// The n-th object member (counted across the whole document).
    Member(usize),
    /// The n-th number.
    Number(usize),
    /// The n-th string value.
    String(usize),
    /// The n-th value of any kind.
    Value(usize),
}

/// What a structural mutation does to its target.
#[derive(Clone)]
enum Edit {
    /// Leave the member out.
    Delete,
    /// Write the member twice.
    Twice,
    /// Write this JSON text instead of the value.
    Replace(String),
}

/// Writes `value` as JSON, applying `edit` to the target: members and values are counted in
/// document order.
struct Writer {
    target: Target,
    edit: Edit,
    seen: usize,
    out: String,
}

impl Writer {
    /// Counts one more target; whether it is the wanted one.
    fn hit(&mut self, wanted: usize) -> bool {
        let n = self.seen;
        self.seen += 1;
        n == wanted
    }

    fn value(&mut self, value: &Value) {
        let wanted = match self.target {
            Target::Number(n) if value.is_number() => Some(n),
            Target::String(n) if value.is_string() => Some(n),
            Target::Value(n) => Some(n),
            _ => None,
        };
        if let Some(n) = wanted
            && self.hit(n)
            && let Edit::Replace(text) = &self.edit
        {
            self.out.push_str(text);
            return;
        }
        match value {
            Value::Object(members) => {
                self.out.push('{');
                let mut first = true;
                for (key, member) in members {
                    let target = self.target;
                    let times = match target {
                        Target::Member(n) if self.hit(n) => match self.edit {
                            Edit::Delete => 0,
                            Edit::Twice => 2,
                            Edit::Replace(_) => 1,
                        },
                        _ => 1,
                    };
                    for _ in 0..times {
                        if !first {
                            self.out.push(',');
                        }
                        first = false;
                        self.out.push_str(&Value::from(key.as_str()).to_string());
                        self.out.push(':');
                        self.value(member);
                    }
                }
                self.out.push('}');
            }
            Value::Array(items) => {
                self.out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.value(item);
                }
                self.out.push(']');
            }
            scalar => self.out.push_str(&scalar.to_string()),
        }
    }
}

/// `value` written back with `edit` applied to the `nth` target of a kind (the index wraps,
/// so any index picks something); `None` when the document has no such target.
fn rewrite(value: &Value, target: fn(usize) -> Target, nth: usize, edit: Edit) -> Option<String> {
    let mut counter = Writer { target: target(usize::MAX), edit: edit.clone(), seen: 0, out: String::new() };
    counter.value(value);
    if counter.seen == 0 {
        return None;
    }
    let mut writer = Writer { target: target(nth % counter.seen), edit, seen: 0, out: String::new() };
    writer.value(value);
    Some(writer.out)
}

/// The mutated text of a file.
fn mutate(text: &str, mutation: &Mutation) -> Vec<u8> {
    let bytes = text.as_bytes();
    if let Mutation::FlipBit { at, bit } = mutation {
        let mut out = bytes.to_vec();
        if !out.is_empty() {
            let at = at % out.len();
            out[at] ^= 1 << bit;
        }
        return out;
    }
    if let Mutation::Truncate { at } = mutation {
        return bytes[..at % (bytes.len() + 1)].to_vec();
    }
    // Structural mutations need JSON; a profile file gets a flipped byte instead.
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return mutate(text, &Mutation::FlipBit { at: text.len() / 2, bit: 1 });
    };
    let rewritten = match mutation.clone() {
        Mutation::Delete { nth } => rewrite(&value, Target::Member, nth, Edit::Delete),
        Mutation::Duplicate { nth } => rewrite(&value, Target::Member, nth, Edit::Twice),
        Mutation::Extreme { nth, value: which } => {
            rewrite(&value, Target::Number, nth, Edit::Replace(EXTREMES[which].to_string()))
        }
        Mutation::HugeRepeat { nth, count } => {
            rewrite(&value, Target::String, nth, Edit::Replace(format!("{{\"repeat\": \"ab\", \"count\": {count}}}")))
        }
        Mutation::WrongType { nth, value: which } => {
            rewrite(&value, Target::Value, nth, Edit::Replace(WRONG_TYPES[which].to_string()))
        }
        Mutation::FlipBit { .. } | Mutation::Truncate { .. } => unreachable!("handled above"),
    };
    rewritten.unwrap_or_else(|| text.to_string()).into_bytes()
}

/// A copy of `scenarios/` (so a mutated file still finds the profile folders beside it),
/// made once per test process.
fn sandbox() -> &'static Path {
    static SANDBOX: OnceLock<tempfile::TempDir> = OnceLock::new();
    SANDBOX
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            for file in targets() {
                let to = dir.path().join(file);
                std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                std::fs::copy(crate::support::manifest_path("scenarios").join(file), to).unwrap();
            }
            dir
        })
        .path()
}

/// Runs `rehearsal run` on the mutated file, in process, and gives the exit code and output.
fn run_mutant(file: &Path, mutated: &[u8]) -> (Exit, String) {
    // Cases run one after another on one thread; each writes its own file and restores it.
    let path = sandbox().join(file);
    let original = std::fs::read(&path).unwrap();
    let scenario = if file.extension().is_some_and(|e| e == "md") {
        // A profile file is read through the scenario whose `profile_dirs` names its folder
        // (`scenarios/bub/<folder>/ws/.agents/agents/x.md`).
        let folder = file.components().nth(1).unwrap().as_os_str().to_str().unwrap();
        let named = |json: &&PathBuf| {
            json.extension().is_some_and(|e| e == "json")
                && json.parent() == file.parent().and_then(|p| p.ancestors().nth(p.components().count() - 1))
                && std::fs::read_to_string(sandbox().join(json)).unwrap().contains(&format!("\"{folder}/"))
        };
        sandbox().join(targets().iter().find(named).expect("a scenario names the profile folder"))
    } else {
        path.clone()
    };
    std::fs::write(&path, mutated).unwrap();
    let cli = Cli::try_parse_from(["rehearsal", "run", scenario.to_str().unwrap()]).unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cli::main(cli, &mut out, &mut err)));
    std::fs::write(&path, original).unwrap();
    let both = format!("{}{}", String::from_utf8_lossy(&out), String::from_utf8_lossy(&err));
    match result {
        Ok(exit) => (exit, both),
        Err(panic) => {
            let message =
                panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
            (Exit::Internal, format!("panicked outside a run: {}\n{both}", message.unwrap_or_default()))
        }
    }
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256);
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/robustness.txt"))),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_mutated_scenario_gives_a_verdict_or_a_clear_error(
        file in any::<prop::sample::Index>(),
        first in mutation(),
        second in prop::option::weighted(0.25, mutation()),
    ) {
        let file = &targets()[file.index(targets().len())];
        let original = std::fs::read_to_string(crate::support::manifest_path("scenarios").join(file)).unwrap();
        let mut mutated = mutate(&original, &first);
        if let Some(second) = &second {
            mutated = mutate(&String::from_utf8_lossy(&mutated), second);
        }
        let (exit, output) = run_mutant(file, &mutated);
        prop_assert!(
            matches!(exit, Exit::Passed | Exit::Failed | Exit::BadInput),
            "{} mutated by {first:?} then {second:?} gave {exit:?}:\n{output}\n--- the mutated file ---\n{}",
            file.display(),
            String::from_utf8_lossy(&mutated)
        );
        // A bad input names the file it came from.
        if exit == Exit::BadInput {
            prop_assert!(output.contains("error: "), "{output}");
        }
    }
}

#[test]
fn the_mutations_change_what_they_say() {
    let text = r#"{"a": 1, "b": {"c": "x", "d": [2, 3]}}"#;
    let value = |m: Mutation| String::from_utf8(mutate(text, &m)).unwrap();
    assert_eq!(value(Mutation::Delete { nth: 0 }), r#"{"b":{"c":"x","d":[2,3]}}"#);
    assert_eq!(value(Mutation::Delete { nth: 2 }), r#"{"a":1,"b":{"d":[2,3]}}"#);
    assert_eq!(value(Mutation::Duplicate { nth: 3 }), r#"{"a":1,"b":{"c":"x","d":[2,3],"d":[2,3]}}"#);
    assert_eq!(value(Mutation::Extreme { nth: 2, value: 5 }), r#"{"a":1,"b":{"c":"x","d":[2,1e300]}}"#);
    assert_eq!(
        value(Mutation::HugeRepeat { nth: 0, count: 7 }),
        r#"{"a":1,"b":{"c":{"repeat": "ab", "count": 7},"d":[2,3]}}"#
    );
    assert_eq!(value(Mutation::WrongType { nth: 1, value: 0 }), r#"{"a":null,"b":{"c":"x","d":[2,3]}}"#);
    // Indexes wrap: the 5th of 4 members is the 1st.
    assert_eq!(value(Mutation::Delete { nth: 4 }), value(Mutation::Delete { nth: 0 }));
    assert_eq!(value(Mutation::Truncate { at: 3 }), r#"{"a"#);
}

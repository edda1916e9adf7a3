//! The architecture invariants of `src/lib.rs`, checked on the source: which top-level room
//! imports which, that no room imports one that imports it back, and that the rooms on the
//! run path read no file and no wall clock (their `Instant` is tokio's, paused). A move that breaks one fails here, not in a reviewer's head.
//!
//! A room is a top-level module (`src/x.rs`, with its submodules in `src/x/`); an import is
//! any `crate::name` outside a comment. `lib.rs`, `main.rs` and `internals.rs` (the
//! re-exports) are not rooms.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The rooms of `src/` and the rooms each one names.
fn imports(src: &Path) -> Graph {
    let mut graph = Graph::new();
    for path in crate::support::rust_files(src) {
        let relative = path.strip_prefix(src).unwrap();
        let room = relative.components().next().unwrap().as_os_str().to_string_lossy();
        let room = room.trim_end_matches(".rs").to_string();
        if ["lib", "main", "internals"].contains(&room.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let named = graph.entry(room.clone()).or_default();
        for other in crate_names(&text) {
            if other != room {
                named.insert(other);
            }
        }
    }
    graph
}

/// Every `crate::name` of a source text, outside `//` comments.
fn crate_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let name: String = after.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                out.insert(name);
            }
            rest = after;
        }
    }
    out
}

/// The rooms on one import cycle, if there is one: a path that comes back to its start.
fn a_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(room: &str, graph: &Graph, path: &mut Vec<String>, done: &mut BTreeSet<String>) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|r| r == room) {
            let mut cycle = path[at..].to_vec();
            cycle.push(room.to_string());
            return Some(cycle);
        }
        if done.contains(room) {
            return None;
        }
        path.push(room.to_string());
        for next in graph.get(room).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(room.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|room| visit(room, graph, &mut Vec::new(), &mut done))
}

fn the_crates_rooms() -> Graph {
    imports(&crate::support::manifest_path("src"))
}

#[test]
fn no_room_imports_one_that_imports_it_back() {
    let graph = the_crates_rooms();
    assert!(graph.len() > 20, "the rooms were found: {graph:?}");
    if let Some(cycle) = a_cycle(&graph) {
        panic!("an import cycle between rooms: {}", cycle.join(" -> "));
    }
}

#[test]
fn the_cycle_check_finds_a_cycle_of_three_and_passes_a_diamond() {
    let graph = |edges: &[(&str, &str)]| {
        let mut g = Graph::new();
        for (from, to) in edges {
            g.entry(from.to_string()).or_default().insert(to.to_string());
        }
        g
    };
    let cycle = a_cycle(&graph(&[("scenario", "coverage"), ("coverage", "evidence"), ("evidence", "scenario")]));
    assert_eq!(cycle.map(|c| c.join(" -> ")).as_deref(), Some("coverage -> evidence -> scenario -> coverage"));
    assert_eq!(a_cycle(&graph(&[("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])), None);
    assert_eq!(
        crate_names("use crate::a::b; // crate::c\nlet x = crate::d::e();"),
        ["a", "d"].map(String::from).into()
    );
}

#[test]
fn the_boundary_and_the_core_import_only_what_lib_rs_says() {
    let graph = the_crates_rooms();
    let named = |room: &str| graph.get(room).cloned().unwrap_or_default();
    let allowed = |room: &str, may: &[&str]| {
        let extra: Vec<String> = named(room).into_iter().filter(|r| !may.contains(&r.as_str())).collect();
        assert!(extra.is_empty(), "`{room}` imports {extra:?}; src/lib.rs allows only {may:?}");
    };
    allowed("sut", &["rules"]);
    allowed("core", &["rules", "seed", "sut"]);
    allowed("clauses", &[]);
    for room in ["harness", "oracles", "coverage", "evidence", "judge", "run", "load", "wire"] {
        assert!(!named(room).contains("core"), "`{room}` imports the core: the harness drives it only through `sut`");
    }
    for room in ["harness", "oracles", "coverage"] {
        assert!(!named("evidence").contains(room), "`evidence` sits below `{room}` but imports it");
    }
    assert!(!named("scenario").contains("load"), "`scenario` (the format) imports `load` (the reader)");
}

#[test]
fn the_wire_is_one_wing_with_one_door() {
    // Everything for runtimes in other processes (serve, drive, record and its proxy, the clock,
    // runtime descriptions, the process helpers) lives under `src/wire/`; only the command
    // line imports it, so the in-process house never depends on the wing.
    let graph = the_crates_rooms();
    let importers: Vec<&String> =
        graph.iter().filter(|(_, named)| named.contains("wire")).map(|(room, _)| room).collect();
    assert_eq!(importers, ["cli"], "only `cli` may import `wire`");
    for moved in ["drive", "record", "runtime", "proxy", "process"] {
        assert!(!graph.contains_key(moved), "`{moved}` is a room of its own; it belongs in the wire wing (src/wire/)");
    }
}

#[test]
fn a_verdict_is_built_only_by_the_judge_and_never_edited() {
    // `Verdict`'s fields are private, and the one struct literal that builds it is in
    // `src/judge/`: every input (determinism, explored orders, the golden file, switched-off
    // oracles) reaches it as data through a `Judgement`.
    let src = crate::support::manifest_path("src");
    let verdict = std::fs::read_to_string(src.join("judge/verdict.rs")).unwrap();
    let body = verdict.split("pub struct Verdict {").nth(1).expect("Verdict is defined in src/judge/verdict.rs");
    let fields = &body[..body.find("\n}").expect("the struct ends")];
    assert!(!fields.contains("pub"), "Verdict has a public field:{fields}");
    let mut builders = Vec::new();
    for path in crate::support::rust_files(&src) {
        let text = std::fs::read_to_string(&path).unwrap();
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or("");
            let literal = code.contains("Verdict {")
                && !code.contains("struct Verdict {")
                && !code.contains("for Verdict {")
                && !code.contains("impl Verdict {")
                && !code.contains("-> Verdict {");
            if literal {
                builders.push(path.strip_prefix(&src).unwrap().display().to_string());
            }
        }
    }
    assert_eq!(builders, ["judge/verdict.rs"], "a Verdict is built outside the judge");
}

#[test]
fn the_rooms_on_the_run_path_read_no_file() {
    let src = crate::support::manifest_path("src");
    for room in ["core", "harness", "evidence", "oracles", "run", "judge", "coverage"] {
        // The room's file and every file under its folder, however deep (`src/coverage/detectors/`).
        let mut files = vec![src.join(format!("{room}.rs"))];
        let mut dirs = vec![src.join(room)];
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for path in entries.map(|e| e.unwrap().path()) {
                if path.is_dir() {
                    dirs.push(path);
                } else {
                    files.push(path);
                }
            }
        }
        for file in files.into_iter().filter(|f| f.is_file()) {
            let text = std::fs::read_to_string(&file).unwrap();
            let code: String = text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
            for io in [
                "std::fs",
                "File::open",
                "read_to_string(",
                "std::net",
                "std::process",
                "SystemTime",
                "std::time::Instant",
            ] {
                assert!(
                    !code.contains(io),
                    "{} uses `{io}`: nothing on the run path does I/O or reads the wall clock",
                    file.display()
                );
            }
        }
    }
}

#[test]
fn every_module_is_written_in_one_style() {
    // `src/x.rs` beside `src/x/`, never `src/x/mod.rs`: a reader finds a room by its name.
    let mut stack = vec![crate::support::manifest_path("src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            assert!(
                path.file_name().is_none_or(|n| n != "mod.rs"),
                "{}: write it as the folder's name plus .rs",
                path.display()
            );
            if path.is_dir() {
                assert!(
                    path.with_extension("rs").is_file(),
                    "{}: a folder of submodules without its module file",
                    path.display()
                );
                stack.push(path);
            }
        }
    }
}

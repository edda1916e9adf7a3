//! Helpers shared by the modules that run the built `rehearsal` binary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// What one run of the binary gave.
pub struct Output {
    /// The exit code (`None` if it died of a signal).
    pub code: Option<i32>,
    /// Everything it printed on stdout.
    pub stdout: String,
    /// Everything it printed on stderr.
    pub stderr: String,
}

impl Output {
    /// Both streams, for assertion messages.
    pub fn both(&self) -> String {
        format!("exit code: {:?}\n--- stdout ---\n{}--- stderr ---\n{}", self.code, self.stdout, self.stderr)
    }
}

/// Runs `rehearsal ARGS` from the crate's root, so fixture paths are printed as given
/// (`tests/fixtures/bad/x.json`).
pub fn rehearsal(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_rehearsal"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the rehearsal binary runs");
    Output {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(out.stderr).expect("stderr is UTF-8"),
    }
}

/// The path of the test runtime (tests/wire_runtime/runtime.rs), built on the first call.
///
/// The runtime is a package of its own, not a binary of this crate, so that `cargo install
/// --path .` installs `rehearsal` alone; so there is no `CARGO_BIN_EXE_` for it, and cargo
/// builds it here instead, into the test target's scratch folder, with its committed lock
/// file. Cargo rebuilds it whenever its source changed, whichever command ran the tests
/// (`cargo test`, `cargo test --test suite`, `cargo nextest run`, each nextest process
/// building or finding it under cargo's own lock), and the path comes from cargo's report of
/// what it built, never from a guess. A build that fails panics with cargo's output: no test
/// runs a stale runtime, and none skips.
pub fn test_runtime() -> &'static str {
    static BUILT: OnceLock<String> = OnceLock::new();
    BUILT.get_or_init(|| {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
        let out = Command::new(cargo)
            .args(["build", "--locked", "--message-format", "json-render-diagnostics", "--manifest-path"])
            .arg(manifest_path("tests/wire_runtime/Cargo.toml"))
            .arg("--target-dir")
            .arg(Path::new(env!("CARGO_TARGET_TMPDIR")).join("wire-runtime"))
            .output()
            .expect("cargo runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "the test runtime (tests/wire_runtime) does not build:\n{}{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        let executables: Vec<String> = stdout
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|message| message["reason"] == "compiler-artifact")
            .filter_map(|message| message["executable"].as_str().map(str::to_string))
            .collect();
        match &executables[..] {
            [one] => one.clone(),
            other => panic!("cargo built {} executables for the test runtime: {other:?}", other.len()),
        }
    })
}

/// The absolute path of a file under the crate's root.
pub fn manifest_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// Every `*.json` file under `dir`, in sorted order, into `out`.
pub fn scenario_files(dir: &Path, out: &mut Vec<PathBuf>) {
    files_ending(dir, "json", out);
}

/// Every `*.rs` file under `dir` (the crate's own source, for the tests that read it), sorted.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    files_ending(dir, "rs", &mut out);
    out
}

fn files_ending(dir: &Path, extension: &str, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files_ending(&path, extension, out);
        } else if path.extension().is_some_and(|e| e == extension) {
            out.push(path);
        }
    }
}
